package front

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/strict"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// DefaultBodyTimeout is m0serve's --body-timeout when none is named; a zero
// Limits.BodyTimeout is no timeout.
const DefaultBodyTimeout = 30 * time.Second

// Linger bounds how long a connection whose upload was refused with 413 is
// read and discarded before it closes, so that a client writing its whole
// body before it reads still reads the refusal. A smaller nonzero
// Limits.IdleTimeout bounds it too.
const Linger = 5 * time.Second

// Limits bound what one connection and one request may cost.
type Limits struct {
	MaxBody              int64                            // request body cap in bytes; 0 none (m0serve's default is wire.DefaultMaxBody)
	BodyTimeout          time.Duration                    // a body still arriving this long after its headers: 408; 0 never
	IdleTimeout          time.Duration                    // idle keep-alive close, and no-send-progress bound; 0 never
	MaxKeepaliveRequests int                              // close a connection after N requests; 0 never
	Logf                 func(format string, args ...any) // first-refusal lines; nil: stderr
}

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

// maxBody is the cap in bytes, or -1 for none.
func (l Limits) maxBody() int64 {
	if l.MaxBody <= 0 {
		return -1
	}
	return l.MaxBody
}

// linger is how long a refused upload is read and discarded; zero closes at
// once.
func (l Limits) linger() time.Duration {
	switch {
	case l.IdleTimeout <= 0:
		return 0
	case l.IdleTimeout < Linger:
		return l.IdleTimeout
	}
	return Linger
}

// forever stands for no deadline where a duration must be positive to
// replace one already set.
const forever = 100 * 365 * 24 * time.Hour

const (
	tooLarge = "Request Entity Too Large\n"
	timedOut = "Request Timeout\n"
)

// refusals prints the first refusal of each kind a server makes.
type refusals struct {
	lim            Limits
	size, deadline sync.Once
}

func (r *refusals) logf(format string, args ...any) {
	if r.lim.Logf != nil {
		r.lim.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (r *refusals) tooLarge() {
	r.size.Do(func() {
		r.logf("m0serve: refused a request body over --max-body %s with 413 (raise --max-body or M0_MAX_BODY)",
			wire.FormatSize(r.lim.maxBody()))
	})
}

func (r *refusals) timedOut() {
	r.deadline.Do(func() {
		r.logf("m0serve: refused a request body still arriving %s after its headers with 408 (raise --body-timeout or M0_BODY_TIMEOUT)",
			r.lim.BodyTimeout)
	})
}

// fastLimits are the fasthttp.Server settings that carry lim.
func fastLimits(s *fasthttp.Server, lim Limits, obs observe.Refuser) {
	rf := &refusals{lim: lim}
	capBytes := lim.maxBody()
	s.MaxRequestBodySize = math.MaxInt
	if capBytes >= 0 && capBytes < math.MaxInt {
		s.MaxRequestBodySize = int(capBytes)
	}
	// ReadTimeout bounds the request line and headers: a new connection's
	// within IdleTimeout of its accept, a kept-alive one's within
	// IdleTimeout of their first byte. IdleTimeout must stay positive for
	// fasthttp to replace the body deadline before the next request.
	s.ReadTimeout = lim.IdleTimeout
	s.IdleTimeout = lim.IdleTimeout
	if s.IdleTimeout <= 0 {
		s.IdleTimeout = forever
	}
	s.MaxRequestsPerConn = lim.MaxKeepaliveRequests
	body := lim.BodyTimeout
	if body <= 0 {
		body = forever
	}
	s.HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
		if h.ContentLength() == 0 || h.ContentLength() == -2 {
			return fasthttp.RequestConfig{}
		}
		return fasthttp.RequestConfig{ReadTimeout: body}
	}
	s.ExpectHandler = func(ctx *fasthttp.RequestCtx) int {
		if capBytes >= 0 && int64(ctx.Request.Header.ContentLength()) > capBytes {
			rf.tooLarge()
			ctx.Error(tooLarge, fasthttp.StatusRequestEntityTooLarge)
			lingerOnClose(ctx.Conn(), lim.linger())
			return fasthttp.StatusRequestEntityTooLarge
		}
		return fasthttp.StatusContinue
	}
	s.ErrorHandler = func(ctx *fasthttp.RequestCtx, err error) {
		answered := true
		defer func() {
			if answered && obs != nil {
				o := observe.Outcome{Status: ctx.Response.StatusCode(), Dur: time.Since(ctx.Time()),
					Bytes: int64(len(ctx.Response.Body()))}
				if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
					o.Remote = a.AddrPort().Addr().Unmap()
				}
				obs.Refused(string(ctx.Method()), wire.Path(ctx), o)
			}
		}()
		switch {
		case errors.Is(err, fasthttp.ErrBodyTooLarge):
			rf.tooLarge()
			ctx.Error(tooLarge, fasthttp.StatusRequestEntityTooLarge)
			lingerOnClose(ctx.Conn(), lim.linger())
		case isTimeout(err) && headerError(ctx, err):
			// As net/http does: a request whose headers never arrived
			// gets no answer.
			answered = false
			ctx.Conn().Close()
		case isTimeout(err):
			// 408, then the connection closes; closing it here instead
			// would lose a pipelined response fasthttp has not flushed.
			rf.timedOut()
			ctx.Error(timedOut, fasthttp.StatusRequestTimeout)
			ctx.SetConnectionClose()
		case bodyRefusal(err, ctx.Conn()) != nil:
			r := bodyRefusal(err, ctx.Conn())
			ctx.Error(r.Body(), r.Status)
			ctx.SetConnectionClose()
		case errors.As(err, new(*fasthttp.ErrSmallBuffer)):
			ctx.Error("Request Header Fields Too Large\n", fasthttp.StatusRequestHeaderFieldsTooLarge)
		default:
			ctx.Error("Bad Request\n", fasthttp.StatusBadRequest)
		}
	}
}

// headerError reports whether err, a read error fasthttp hands its
// ErrorHandler, arose before the headers were whole: fasthttp wraps the
// errors of a partial header, and hands on bare the error of a new
// connection that sent nothing.
func headerError(ctx *fasthttp.RequestCtx, err error) bool {
	if lc, ok := ctx.Conn().(*limitConn); ok && !lc.readAny.Load() {
		return true
	}
	var nothing fasthttp.ErrNothingRead
	return errors.As(err, &nothing) || strings.Contains(err.Error(), "error when reading request headers")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// lingerOnClose makes c, if it came from a Limits listener, read and discard
// what the client still sends for up to d when it is closed.
func lingerOnClose(c net.Conn, d time.Duration) {
	if lc, ok := c.(*limitConn); ok {
		lc.linger.Store(int64(d))
		lc.refused.Store(true)
	}
}

// limitHandler enforces lim around h for net/http.
type limitHandler struct {
	h   http.Handler
	lim Limits
	rf  *refusals
}

// netLimits returns the net/http server that serves h within lim.
func netLimits(h http.Handler, lim Limits) *http.Server {
	lh := &limitHandler{h: h, lim: lim, rf: &refusals{lim: lim}}
	return &http.Server{
		Handler: lh,
		// Headers arrive within IdleTimeout of the request's start;
		// zero, as IdleTimeout's zero, is no bound.
		ReadHeaderTimeout: lim.IdleTimeout,
		IdleTimeout:       lim.IdleTimeout,
		// OPTIONS * is answered by limitHandler (strictNet), after the
		// request count, as on fasthttp.
		DisableGeneralOptionsHandler: true,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, observe.ConnKey{}, &observe.Conn{Conn: c})
		},
	}
}

var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (lh *limitHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cs, _ := r.Context().Value(observe.ConnKey{}).(*observe.Conn)
	if cs == nil {
		cs = &observe.Conn{}
	}
	cs.Requests++
	obs, _ := lh.h.(observe.Refuser)
	defer servedNet(cs.Conn, cs.Requests)
	if rf := strict.Refused(cs.Conn, []byte(r.RequestURI)); rf != nil && rf.Status == http.StatusRequestEntityTooLarge {
		// --max-body's own 413, logged once, of the request as sent.
		r.Method, r.URL.Path = rf.Method, rf.Target
		lh.refuse(w, r, http.StatusRequestEntityTooLarge)
		return
	}
	if strictNet(w, r, cs.Conn, obs) {
		return
	}
	if n := lh.lim.MaxKeepaliveRequests; n > 0 && cs.Requests >= n {
		w.Header().Set("Connection", "close")
	}
	capBytes := lh.lim.maxBody()
	if capBytes >= 0 && r.ContentLength > capBytes {
		lh.refuse(w, r, http.StatusRequestEntityTooLarge)
		return
	}
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		lh.h.ServeHTTP(w, r)
		return
	}
	if cs.Conn != nil && lh.lim.BodyTimeout > 0 {
		cs.Conn.SetReadDeadline(time.Now().Add(lh.lim.BodyTimeout))
	}
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			bodyBuffers.Put(buf)
		}
	}()
	var rd io.Reader = r.Body
	if capBytes >= 0 {
		rd = io.LimitReader(r.Body, capBytes+1)
	}
	_, err := buf.ReadFrom(rd)
	if cs.Conn != nil && lh.lim.BodyTimeout > 0 {
		// net/http's own read after the body must not inherit the deadline.
		cs.Conn.SetReadDeadline(time.Time{})
	}
	switch {
	case err != nil && isTimeout(err):
		lh.refuse(w, r, http.StatusRequestTimeout)
		return
	case bodyRefusal(err, cs.Conn) != nil:
		answerNet(w, r, bodyRefusal(err, cs.Conn), obs)
		return
	case err != nil:
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			http.Error(w, "Bad Request", http.StatusBadRequest)
		}
		return
	case capBytes >= 0 && int64(buf.Len()) > capBytes:
		lh.refuse(w, r, http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
	r.ContentLength = int64(buf.Len())
	lh.h.ServeHTTP(w, r)
}

// refuse answers 413 or 408 on the connection itself and closes it: a 413
// after reading and discarding the rest of the upload for the linger.
func (lh *limitHandler) refuse(w http.ResponseWriter, r *http.Request, status int) {
	start := time.Now()
	msg := tooLarge
	if status == http.StatusRequestTimeout {
		lh.rf.timedOut()
		msg = timedOut
	} else {
		lh.rf.tooLarge()
	}
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.Header().Set("Connection", "close")
		http.Error(w, strings.TrimSuffix(msg, "\n"), status)
		return
	}
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nDate: %s\r\n\r\n%s",
		status, http.StatusText(status), len(msg), time.Now().UTC().Format(http.TimeFormat), msg)
	if obs, ok := lh.h.(observe.Refuser); ok {
		o := observe.Outcome{Status: status, Dur: time.Since(start), Bytes: int64(len(msg))}
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			o.Remote = ap.Addr().Unmap()
		}
		obs.Refused(r.Method, r.URL.Path, o)
	}
	if status == http.StatusRequestEntityTooLarge {
		lingerOnClose(c, lh.lim.linger())
	}
	c.Close()
}

// limitListener hands out limitConns. A failure to accept (out of
// descriptors, say) is retried with sock.AcceptRetry's backoff until the
// listener closes: fasthttp's Serve returns on such a failure, and the
// server would stop serving for good.
type limitListener struct {
	net.Listener
	idle   time.Duration
	mu     sync.Mutex
	conns  map[*limitConn]struct{} // open connections
	retry  sock.AcceptRetry
	made   sync.Once
	closed chan struct{} // closed by Close
	shut   sync.Once
	err    error // Close's
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

// closeUnused closes the open connections that have not sent a byte: they
// carry no request, and a drain need not wait for one (a browser's
// preconnect, say). A connection accepted less than UnusedGrace ago, or
// whose first bytes are waiting to be read, is left to be served.
func (l *limitListener) closeUnused() {
	l.mu.Lock()
	var unused []*limitConn
	for c := range l.conns {
		if !c.readAny.Load() && time.Since(c.accepted) >= UnusedGrace && !sock.Pending(c.Conn) {
			unused = append(unused, c)
		}
	}
	l.mu.Unlock()
	for _, c := range unused {
		c.Close()
	}
}

// limitConn bounds a send that makes no progress, and lingers on a refused
// upload when it closes.
type limitConn struct {
	net.Conn
	send sock.SendWindow // IdleTimeout wide
	// explicit: a caller set a write deadline of its own, which Write
	// keeps rather than renewing its window over it.
	explicit atomic.Bool
	readAny  atomic.Bool // a byte has arrived
	accepted time.Time
	refused  atomic.Bool
	// started is when the first bytes of the request being read arrived
	// (Unix nanoseconds): a Read with data after a Write begins a request.
	started atomic.Int64
	wrote   atomic.Bool
	ln      *limitListener
	linger  atomic.Int64 // a time.Duration
	once    sync.Once
	err     error
}

func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if !c.readAny.Load() {
			c.readAny.Store(true)
			c.started.Store(time.Now().UnixNano())
		} else if c.wrote.Load() {
			c.wrote.Store(false)
			c.started.Store(time.Now().UnixNano())
		}
	}
	return n, err
}

// RequestStart returns when the request being served began to arrive, or
// the zero time before any did.
func (c *limitConn) RequestStart() time.Time {
	if ns := c.started.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Write sends p under a deadline IdleTimeout ahead, renewed while the
// client takes bytes: it fails only once a whole IdleTimeout passes with
// none taken, however long p takes to send. Under a write deadline a
// caller set, it writes under that one.
func (c *limitConn) Write(p []byte) (int, error) {
	if !c.wrote.Load() {
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
	return c.Conn.SetDeadline(t)
}

// SyscallConn gives the connection's descriptor (sock.WatchClose).
func (c *limitConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("m0: the connection has no descriptor")
}

// CloseWrite half-closes the connection when the underlying one can.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection once. After a refused upload it first sends
// its FIN and reads and discards what the client still sends, until the
// client closes or the linger ends.
func (c *limitConn) Close() error {
	c.once.Do(func() {
		if d := time.Duration(c.linger.Load()); c.refused.Load() && d > 0 {
			// Read from the socket itself: a strict reading reads as
			// closed after a refusal.
			raw := c.Conn
			if s := strict.StrictOf(raw); s != nil {
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
