package host

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/m0serve/m0/asgi"
	"github.com/m0serve/m0/internal/front"
	"github.com/m0serve/m0/static"
)

// inlineServer serves a loop whose ASGI application runs inverted
// (M0_INVERTED=1): its executor's inline front end accepts and serves the
// plain requests on the loop's thread, and every connection it hands off
// goes to the fasthttp front end that serves the loop otherwise, with the
// same limits, strict reading and middleware, through handed.
//
// On more than one usable CPU, the process's looks (procs.go) shed the
// loop's connections to that server while the loop is the pace, and Go's
// side then runs on one P, as under the default front end.
type inlineServer struct {
	h      *asgi.Handler
	inner  front.Server // the loop's server, on handed
	handed *handedListener
	opts   asgi.InlineOptions
	oneCPU bool        // the process has one usable CPU: inlineProcs gave it a second P
	shed   atomic.Bool // connections go to inner: the loop is the pace (shedder)
	ending atomic.Bool // Shutdown began: inner stops taking connections, none is shed
	mu     sync.Mutex
	ln     net.Listener
}

func newInlineServer(l *Loop, c *Config, served func()) *inlineServer {
	s := &inlineServer{h: l.inline, inner: front.New(l.Handler, c.limits()), oneCPU: inlineProcs()}
	s.opts = asgi.InlineOptions{
		Idle: c.IdleTimeout, MaxRequests: c.MaxKeepaliveRequests, Claimed: c.claimed, Served: served,
		Shed: s.shedding,
	}
	return s
}

func (s *inlineServer) shedding() bool { return s.shed.Load() && !s.ending.Load() }

// Requesting is how many connections began a request lately: the inline
// front end's since the last call, the handed ones' since since (a
// sock.Mono reading). One goroutine, the process's looks, calls it.
func (s *inlineServer) Requesting(since int64) int {
	n := s.h.InlineRequesting()
	if r, ok := s.inner.(interface{ Requesting(int64) int }); ok {
		n += r.Requesting(since)
	}
	return n
}

func (s *inlineServer) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	s.handed = newHandedListener(ln.Addr())
	s.mu.Unlock()
	go s.inner.Serve(s.handed)
	return s.h.ServeInline(ln, s.handed.put, s.opts)
}

// Shutdown stops accepting, then drains the inline connections and the
// handed ones, within ctx.
func (s *inlineServer) Shutdown(ctx context.Context) error {
	s.ending.Store(true) // inner's listener closes below: a request shed now would be lost
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	var inline error
	done := make(chan struct{})
	go func() {
		inline = s.h.ShutdownInline(ctx)
		close(done)
	}()
	err := s.inner.Shutdown(ctx)
	<-done
	return errors.Join(inline, err)
}

// inlineProcs gives the process a second P under the inverted loop on one
// usable CPU, unless GOMAXPROCS is set. The loop's thread holds its P
// through every cgo call that runs Python: with that P the only one, the
// runtime's monitor takes it back once a request, starts another thread
// to look for work, and ticks every 20 µs while it does (on one CPU, a
// fifth of the process's time at one connection, measured); with an idle
// P beside it, the monitor leaves the loop's P alone. It reports whether
// it did.
func inlineProcs() bool {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
		return true
	}
	return false
}

// claimed reports whether the server answers a path itself, in front of
// the application: --health-path (matched decoded, as wire.PathIs), and the
// --static prefixes (static.Claims).
func (c *Config) claimed(raw, decoded string) bool {
	if c.HealthPath != "" && decoded == c.HealthPath {
		return true
	}
	for _, d := range c.StaticDirs() {
		if static.Claims(d.Prefix, decoded) {
			return true
		}
	}
	return false
}

// handedListener is a listener whose connections are those the inline
// front end handed off.
type handedListener struct {
	addr   net.Addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newHandedListener(addr net.Addr) *handedListener {
	return &handedListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

// put hands c to the server; once the listener is closed, c is closed.
func (l *handedListener) put(c net.Conn) error {
	select {
	case l.conns <- c:
		return nil
	case <-l.closed:
		c.Close()
		return net.ErrClosed
	}
}

func (l *handedListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *handedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *handedListener) Addr() net.Addr { return l.addr }
