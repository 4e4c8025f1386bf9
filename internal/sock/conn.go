package sock

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// CountedConn is a connection counted open on a loop or a worker: the
// count, which whoever placed the connection there raised, falls when it
// closes. It passes on what the connection below can do (the limits ask
// for each).
type CountedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

// Counted returns c counted on open until it closes.
func Counted(c net.Conn, open *atomic.Int64) *CountedConn {
	return &CountedConn{Conn: c, open: open}
}

func (c *CountedConn) Close() error {
	c.Uncount()
	return c.Conn.Close()
}

// Uncount takes the connection off its count without closing it (it was
// passed on).
func (c *CountedConn) Uncount() { c.once.Do(func() { c.open.Add(-1) }) }

// SyscallConn gives the connection's descriptor (WatchClose, the
// keepalive of held sockets).
func (c *CountedConn) SyscallConn() (syscall.RawConn, error) { return RawConn(c.Conn) }

// CloseWrite half-closes the connection when the underlying one can.
func (c *CountedConn) CloseWrite() error { return CloseWrite(c.Conn) }

// ReadFrom sends with sendfile when the underlying connection can.
func (c *CountedConn) ReadFrom(r io.Reader) (int64, error) { return ReadFrom(c.Conn, r) }

// AcceptLoop accepts from ln and hands each connection to place until ln
// is closed or closed is, retrying a failure to accept as AcceptRetry does.
func AcceptLoop(ln net.Listener, closed <-chan struct{}, place func(net.Conn)) {
	var r AcceptRetry
	for {
		c, err := r.Accept(ln, closed)
		if err != nil {
			return
		}
		place(c)
	}
}

// AcceptRetry accepts from a listener through failures: one that fails to
// accept for any reason but its closing (out of descriptors, say) is
// retried after a pause that doubles from 5 ms up to a second, restarting
// at 5 ms after a connection is accepted, as net/http's Serve does, and
// never in a loop that spins. Failures are logged at most once per
// LogEvery, each line with how many failed since the one before. The zero
// value is ready; it is safe for concurrent use.
type AcceptRetry struct {
	Logger *slog.Logger // where failures are logged; nil: slog.Default()

	throttle Throttle
}

// LogEvery is how often AcceptRetry logs, at most, while accepting fails.
const LogEvery = time.Second

// Accept returns ln's next connection. It returns net.ErrClosed once ln is
// closed or closed is (a nil closed never is), and only then.
func (r *AcceptRetry) Accept(ln net.Listener, closed <-chan struct{}) (net.Conn, error) {
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		select {
		case <-closed:
			return nil, net.ErrClosed
		default:
		}
		if errors.Is(err, net.ErrClosed) {
			return nil, net.ErrClosed
		}
		pause = min(max(2*pause, 5*time.Millisecond), time.Second)
		r.failure(err, pause)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-closed:
			t.Stop()
			return nil, net.ErrClosed
		}
	}
}

// failure counts a failure to accept and logs it, unless a line went out
// less than LogEvery ago.
func (r *AcceptRetry) failure(err error, pause time.Duration) {
	failed, ok := r.throttle.Note()
	if !ok {
		return
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Warn("m0serve: cannot accept a connection; retrying", "error", err.Error(), "in", pause.String(),
		"failures", failed)
}

// Throttle lets a failure that repeats be logged at most once per
// LogEvery, each line saying how many there were since the one before.
// The zero value is ready; it is safe for concurrent use.
type Throttle struct {
	mu     sync.Mutex
	logged time.Time // when the last line was logged
	failed int       // failures since then
}

// Note counts a failure. It reports whether to log it, and how many
// failures the line stands for (this one and those not logged since the
// line before).
func (t *Throttle) Note() (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed++
	now := time.Now()
	if !t.logged.IsZero() && now.Sub(t.logged) < LogEvery {
		return 0, false
	}
	failed := t.failed
	t.logged, t.failed = now, 0
	return failed, true
}

// heldConn is a connection that may hold bytes it read and has not handed
// on: the strict reading's (an unfinished head), a handed-off connection's
// (what the inline front end read before handing it).
type heldConn interface {
	net.Conn
	Held() bool
}

// Pending reports whether bytes are waiting to be read on c: held by a
// connection it wraps, or on its socket.
func Pending(c net.Conn) bool {
	if Each(c, func(l net.Conn) bool { h, ok := l.(heldConn); return ok && h.Held() }) {
		return true
	}
	n := 0
	WithFD(c, func(fd uintptr) { n = readable(int(fd)) })
	return n > 0
}

// WithFD calls f with c's descriptor, as it is (net.TCPConn.File would
// dup it and make it blocking), while c cannot close it. It returns
// errors.ErrUnsupported for a c without one (a pipe, a TLS connection).
func WithFD(c net.Conn, f func(fd uintptr)) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return errors.ErrUnsupported
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(f)
}

// Merge returns one listener for several: Accept returns a connection of
// any of them, and Close closes them all, the connections they accepted
// before it returned by Accept first, so that none is dropped unserved.
// Each is accepted from as AcceptLoop does. One listener is itself.
func Merge(lns ...net.Listener) net.Listener {
	if len(lns) == 1 {
		return lns[0]
	}
	m := &merged{lns: lns, conns: make(chan net.Conn, mergeQueue), stopping: make(chan struct{}), closed: make(chan struct{})}
	m.accepting.Add(len(lns))
	for _, ln := range lns {
		go func() {
			defer m.accepting.Done()
			AcceptLoop(ln, m.stopping, m.place)
		}()
	}
	return m
}

// mergeQueue is how many accepted connections may wait for Accept.
const mergeQueue = 64

type merged struct {
	lns       []net.Listener
	conns     chan net.Conn
	stopping  chan struct{} // closed as Close begins
	accepting sync.WaitGroup
	closed    chan struct{} // closed once every accepted connection is in conns
	once      sync.Once
	err       error
}

// place queues c for Accept; once Close has begun, a connection there is
// no room for is closed.
func (m *merged) place(c net.Conn) {
	select {
	case m.conns <- c:
	case <-m.stopping:
		select {
		case m.conns <- c:
		default:
			c.Close()
		}
	}
}

func (m *merged) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.closed:
	}
	select {
	case c := <-m.conns:
		return c, nil
	default:
		return nil, net.ErrClosed
	}
}

func (m *merged) Close() error {
	m.once.Do(func() {
		close(m.stopping)
		var errs []error
		for _, ln := range m.lns {
			errs = append(errs, ln.Close())
		}
		m.err = errors.Join(errs...)
		m.accepting.Wait()
		close(m.closed)
	})
	return m.err
}

// Addr is the first listener's address.
func (m *merged) Addr() net.Addr { return m.lns[0].Addr() }
