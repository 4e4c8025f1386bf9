package front

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/strict"
	"github.com/valyala/fasthttp"
)

// Listener wraps ln so that its connections carry the limits the HTTP
// parser cannot: a send that makes no progress for IdleTimeout fails and the
// connection closes, and a connection whose upload was refused is read and
// discarded for up to Linger before it closes. FastServer's and net/http's
// servers built by this package must serve on such a listener for those two
// limits to hold; the rest hold on any listener.
func (l Limits) Listener(ln net.Listener) net.Listener {
	if _, ok := ln.(*limitListener); ok {
		return ln
	}
	return &limitListener{Listener: ln, idle: l.IdleTimeout}
}

// limitListener hands out limitConns. A failure to accept (out of
// descriptors, say) is retried with sock.AcceptRetry's backoff until the
// listener closes: fasthttp's Serve returns on such a failure, and the
// server would stop serving for good.
type limitListener struct {
	net.Listener
	idle    time.Duration
	park    *fasthttp.Server // serves again a connection that left it idle (park.go); nil: none leaves
	stopped atomic.Bool      // a connection waiting out of fasthttp closes when it wakes (closeWaiting)
	mu      sync.Mutex
	conns   map[*limitConn]struct{} // open connections
	retry   sock.AcceptRetry
	made    sync.Once
	closed  chan struct{} // closed by Close
	shut    sync.Once
	err     error // Close's
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.retry.Accept(l.Listener, l.done())
	if err != nil {
		return nil, err
	}
	lc := &limitConn{Conn: c, send: sock.SendWindow{Window: l.idle}, ln: l, accepted: time.Now()}
	l.mu.Lock()
	if l.conns == nil {
		l.conns = map[*limitConn]struct{}{}
	}
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	return lc, nil
}

// done is closed once Close is called.
func (l *limitListener) done() chan struct{} {
	l.made.Do(func() { l.closed = make(chan struct{}) })
	return l.closed
}

// Close closes the listener once, ending an Accept that waits to retry.
func (l *limitListener) Close() error {
	l.shut.Do(func() {
		close(l.done())
		l.err = l.Listener.Close()
	})
	return l.err
}

// UnusedGrace is how long a drain leaves a connection that has sent
// nothing yet: a client that has just connected sends its request within
// it.
const UnusedGrace = 250 * time.Millisecond

// KeptGrace is how long a drain leaves a kept-alive connection idle
// before it closes it: a client under load sends its next request within
// it, and is answered with Connection: close; one that sends later finds
// the connection closed before it sends, as after an idle timeout.
const KeptGrace = 500 * time.Millisecond

// closeQuiet closes the open connections that carry no request, and
// returns how many are left that are not held streams. A connection that
// has not sent a byte carries none (a browser's preconnect, say), once
// UnusedGrace has passed since its accept; a kept-alive one carries none
// once it has been idle for KeptGrace. One whose next bytes are waiting
// to be read is left to be served.
func (l *limitListener) closeQuiet() int {
	l.mu.Lock()
	var quiet []*limitConn
	left := 0
	now := time.Now()
	for c := range l.conns {
		switch st := connPhase(c.phase.Load()); {
		case st == phaseHijacked:
			continue
		case !c.readAny.Load() && now.Sub(c.accepted) >= UnusedGrace,
			// Idle since its last answer, and no byte of a next request
			// read since (net/http says active only once a whole head
			// is in).
			st == phaseIdle && c.started.Load() <= c.idleSince.Load() &&
				now.Sub(sock.MonoTime(c.idleSince.Load())) >= KeptGrace:
			if !sock.Pending(c.Conn) {
				quiet = append(quiet, c)
				continue
			}
		}
		left++
	}
	l.mu.Unlock()
	for _, c := range quiet {
		c.Close()
	}
	return left
}

// connPhase is where a connection is between requests, as its server
// reports it (ConnState).
type connPhase int32

const (
	phaseNew connPhase = iota
	phaseActive
	phaseIdle
	phaseHijacked
	phaseClosed
)

func connState[S fasthttp.ConnState | http.ConnState](st S) connPhase {
	switch int(st) { // the two servers number their states alike
	case int(http.StateActive):
		return phaseActive
	case int(http.StateIdle):
		return phaseIdle
	case int(http.StateHijacked):
		return phaseHijacked
	case int(http.StateClosed):
		return phaseClosed
	}
	return phaseNew
}

// track records a connection's phase, for closeQuiet.
func track(c net.Conn, p connPhase) {
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	if p == phaseActive {
		lc.back.Store(false)
	}
	if p == phaseIdle {
		if prev, started := lc.idleSince.Load(), lc.started.Load(); prev != 0 && started > prev {
			lc.lastGap.Store(started - prev)
		}
		lc.idleSince.Store(sock.Mono())
	}
	lc.phase.Store(int32(p))
}

// limitConn bounds a send that makes no progress, and lingers on a refused
// upload when it closes.
type limitConn struct {
	net.Conn
	send sock.SendWindow // IdleTimeout wide
	// rd is the read deadline, set on the socket only when it must be:
	// the server asks for one or two on every request.
	rd sock.ReadDeadline
	// explicit: a caller set a write deadline of its own, which Write
	// keeps rather than renewing its window over it.
	explicit  atomic.Bool
	readAny   atomic.Bool // a byte has arrived
	accepted  time.Time
	phase     atomic.Int32 // a connPhase
	idleSince atomic.Int64 // a sock.Mono reading, when phase last became phaseIdle
	refused   atomic.Bool
	// started is when the first bytes of the request being read arrived
	// (a sock.Mono reading): a Read with data after a Write begins a request.
	started atomic.Int64
	wrote   atomic.Bool
	kept    atomic.Bool // answered a request: a kept-alive connection
	// Leaving fasthttp while idle (park.go):
	away    atomic.Bool  // leaving: fasthttp's Close of it is not a close
	waiting atomic.Bool  // out of fasthttp (from its Close that was not one), waiting for bytes
	back    atomic.Bool  // came back, and no request began since
	left    atomic.Bool  // it has left once
	closed  atomic.Bool  // closed for good
	lastGap atomic.Int64 // the idle wait before its last request (ns)
	base    atomic.Int64 // requests fasthttp served before it last came back
	lastNum atomic.Int64 // the number of its last request served (requestNum)
	ln      *limitListener
	linger  atomic.Int64 // a time.Duration
	once    sync.Once
	err     error
}

func (c *limitConn) Read(p []byte) (int, error) {
	if c.parks() {
		return 0, io.EOF // fasthttp ends the connection's turn quietly
	}
	n, err := c.Conn.Read(p)
	for n == 0 && (c.rd.Retry(c.Conn, err) || c.headBound(err)) {
		n, err = c.Conn.Read(p) // an earlier deadline than the one asked for passed
	}
	if n > 0 {
		if !c.readAny.Load() {
			c.readAny.Store(true)
			c.started.Store(sock.Mono())
		} else if c.wrote.Load() {
			c.wrote.Store(false)
			c.started.Store(sock.Mono())
		}
	}
	return n, err
}

// headBound reports whether a read that failed with err should be tried
// again because the deadline that passed was the idle wait's, and the
// first bytes of a head arrived before it: a kept-alive connection's head
// is bounded from its first byte, which the server does not see until the
// strict reading passes the whole head. It sets that bound once a head.
func (c *limitConn) headBound(err error) bool {
	if c.ln == nil || c.ln.idle <= 0 || connPhase(c.phase.Load()) != phaseIdle || !isTimeout(err) {
		return false
	}
	s := strict.Of(c.Conn)
	if s == nil {
		return false
	}
	since := s.HeadSince()
	if since == 0 || since <= c.idleSince.Load() {
		return false
	}
	at := since + int64(c.ln.idle)
	if at <= sock.Mono() || c.rd.Want() >= at {
		return false
	}
	return c.rd.Set(c.Conn, sock.MonoTime(at)) == nil
}

// RequestStart returns when the request being served began to arrive, or
// the zero time before any did.
func (c *limitConn) RequestStart() time.Time {
	if ns := c.started.Load(); ns != 0 {
		return sock.MonoTime(ns)
	}
	return time.Time{}
}

// Write sends p under a deadline IdleTimeout ahead, renewed while the
// client takes bytes: it fails only once a whole IdleTimeout passes with
// none taken, however long p takes to send. Under a write deadline a
// caller set, it writes under that one.
func (c *limitConn) Write(p []byte) (int, error) {
	if !c.wrote.Load() && !interim(p) {
		c.wrote.Store(true)
	}
	if c.send.Window <= 0 || c.explicit.Load() {
		return c.Conn.Write(p)
	}
	written := 0
	for {
		if err := c.send.Renew(c.Conn); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(p[written:])
		written += n
		if err != nil && n > 0 && written < len(p) && isTimeout(err) {
			continue // progress within the window: a fresh one
		}
		return written, err
	}
}

// interim reports whether p opens an interim (1xx) response, which the
// request's body follows (100 Continue): the request has not been
// answered, and what is read next is still its own.
func interim(p []byte) bool {
	return len(p) >= 10 && string(p[:5]) == "HTTP/" && p[8] == ' ' && p[9] == '1'
}

// ReadFrom sends what r holds with the connection's own ReadFrom (sendfile
// for a file on a TCP socket), under the same bound as Write: it fails only
// once a whole IdleTimeout passes with nothing taken.
func (c *limitConn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(writerOnly{c}, r)
	}
	c.wrote.Store(true)
	if c.send.Window <= 0 || c.explicit.Load() {
		return rf.ReadFrom(r)
	}
	var total int64
	for {
		c.send.Forget() // a whole window for each sendfile
		if err := c.send.Renew(c.Conn); err != nil {
			return total, err
		}
		n, err := rf.ReadFrom(r)
		total += n
		if err != nil && n > 0 && isTimeout(err) {
			continue // progress within the window: a fresh one
		}
		return total, err
	}
}

// writerOnly hides a writer's ReadFrom, so io.Copy does not call it back.
type writerOnly struct{ io.Writer }

// SetWriteDeadline sets a deadline of the caller's, which writes keep
// until it is cleared (the zero time) and the window is renewed again.
func (c *limitConn) SetWriteDeadline(t time.Time) error {
	c.explicit.Store(!t.IsZero())
	c.send.Forget()
	return c.Conn.SetWriteDeadline(t)
}

func (c *limitConn) SetDeadline(t time.Time) error {
	c.explicit.Store(!t.IsZero())
	c.send.Forget()
	return c.rd.Reset(c.Conn, t)
}

// SetReadDeadline asks for t as the read deadline (ReadDeadline).
func (c *limitConn) SetReadDeadline(t time.Time) error { return c.rd.Set(c.Conn, t) }

// SyscallConn gives the connection's descriptor (sock.WatchClose).
func (c *limitConn) SyscallConn() (syscall.RawConn, error) { return sock.RawConn(c.Conn) }

// CloseWrite half-closes the connection when the underlying one can.
func (c *limitConn) CloseWrite() error { return sock.CloseWrite(c.Conn) }

// Close closes the connection once. After a refused upload it first sends
// its FIN and reads and discards what the client still sends, until the
// client closes or the linger ends.
func (c *limitConn) Close() error {
	if c.away.Swap(false) {
		c.waiting.Store(true) // fasthttp's StateClosed starts its wait; closeWaiting sees it
		return nil
	}
	c.once.Do(func() {
		c.closed.Store(true)
		if d := time.Duration(c.linger.Load()); c.refused.Load() && d > 0 {
			// Read from the socket itself: a strict reading reads as
			// closed after a refusal.
			raw := c.Conn
			if s := strict.Of(raw); s != nil {
				raw = s.NetConn()
			}
			if c.CloseWrite() == nil && raw.SetReadDeadline(time.Now().Add(d)) == nil {
				io.Copy(io.Discard, raw)
			}
		}
		c.err = c.Conn.Close()
		if c.ln != nil {
			c.ln.mu.Lock()
			delete(c.ln.conns, c)
			c.ln.mu.Unlock()
		}
	})
	return c.err
}

// lingerOnClose makes c, if it came from a Limits listener, read and discard
// what the client still sends for up to d when it is closed.
func lingerOnClose(c net.Conn, d time.Duration) {
	if lc, ok := c.(*limitConn); ok {
		lc.linger.Store(int64(d))
		lc.refused.Store(true)
	}
}
