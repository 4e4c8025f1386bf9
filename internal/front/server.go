package front

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/internal/strict"
	"github.com/valyala/fasthttp"
)

// FastHandler is what a server needs of a handler to serve it with
// fasthttp: the floor's view of the public contract, middleware.FastHandler,
// which this package cannot import. A worker whose handler is one serves
// with fasthttp, which costs a third of net/http per request; any other
// handler is served by net/http.
type FastHandler interface {
	http.Handler
	ServeFastHTTP(ctx *fasthttp.RequestCtx)
}

// Server is the part of the HTTP server a worker drives.
type Server interface {
	Serve(ln net.Listener) error
	Shutdown(ctx context.Context) error
}

// IdleTimeout is m0serve's --idle-timeout when none is named.
const IdleTimeout = 60 * time.Second

// New returns the server a worker serves h with, within lim, on a
// listener it wraps with lim.Listener.
func New(h http.Handler, lim Limits) Server {
	ls := &limitedServer{lim: lim, served: make(chan struct{})}
	if fh, ok := h.(FastHandler); ok {
		srv := FastServer(fh, lim)
		inner := srv.Handler
		srv.Handler = func(ctx *fasthttp.RequestCtx) {
			inner(ctx)
			if ls.draining.Load() {
				ctx.SetConnectionClose() // its last answer
			}
		}
		ls.serve, ls.shutdown = srv.Serve, srv.ShutdownWithContext
		if lim.MaxKeepaliveRequests == 0 { // fasthttp counts a connection's requests anew each time it comes back
			ls.park = srv
		}
		return ls
	}
	srv := netLimits(&lastAnswer{h: h, draining: &ls.draining}, lim)
	ls.serve, ls.shutdown = srv.Serve, srv.Shutdown
	return ls
}

// lastAnswer marks every answer of h Connection: close once draining is
// set, and passes the news of a refused request on to h.
type lastAnswer struct {
	h        http.Handler
	draining *atomic.Bool
}

func (a *lastAnswer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.draining.Load() {
		w.Header().Set("Connection", "close")
	}
	a.h.ServeHTTP(w, r)
}

func (a *lastAnswer) Refused(method, path string, o observe.Outcome) {
	observe.PassRefused(a.h, method, path, o)
}

// KeepsHijackedConns is whether FastServer's server leaves a hijacked
// connection open when its hijack handler returns (what the realtime holds
// are told, realtime.HoldOptions.KeepHijackedConns).
const KeepsHijackedConns = true

// FastServer returns the fasthttp server m0serve serves h with, within lim.
// A request body over the cap or too slow to arrive never reaches h. Serve
// it on lim.Listener(ln) for the bound on a send that makes no progress and
// for the linger after a refused upload.
func FastServer(h FastHandler, lim Limits) *fasthttp.Server {
	obs, _ := h.(observe.Refuser)
	s := &fasthttp.Server{
		// Bodies are read as they arrive (readBody), so a slow upload
		// holds what it sent, not the length it announced.
		StreamRequestBody:     true,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		// The application parses its own bodies, byte for byte.
		DisablePreParseMultipartForm: true,
		// Request line and headers up to 16 KiB (an 8 KiB cookie fits).
		ReadBufferSize: 16 << 10,
		// Every hijack handler closes its connection; a held stream is
		// held apart from fasthttp's request context and read buffer.
		KeepHijackedConns: KeepsHijackedConns,
		// A response finished during a drain says Connection: close, as
		// net/http's does: the client does not send its next request on
		// a connection that is closing.
		CloseOnShutdown: true,
		ConnState: func(c net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateClosed {
				if lc, ok := leaving(c); ok {
					go lc.wait() // it left idle, and stays as it was (park.go)
					return
				}
			}
			p := connState(st)
			track(c, p)
			fastDeadline(c, p, lim.IdleTimeout)
		},
		// No clock read for ctx.Time on every request: a request's start
		// is its connection's mark (observe.FastStart).
		LazyRequestTime: true,
		Logger:          log.New(io.Discard, "", 0),
	}
	fastLimits(s, lim, obs)
	s.Handler = strictFast(h.ServeFastHTTP, obs, lim, s.ErrorHandler)
	return s
}

// limitedServer is either server, serving on a listener wrapped with its
// limits.
type limitedServer struct {
	serve    func(net.Listener) error
	shutdown func(context.Context) error
	lim      Limits
	park     *fasthttp.Server // the fasthttp server an idle connection leaves and comes back to; nil: none leaves
	ln       atomic.Value     // the net.Listener served
	served   chan struct{}    // closed when Serve returns: nothing more is accepted
	draining atomic.Bool      // every answer from now on is its connection's last
}

func (s *limitedServer) Serve(ln net.Listener) error {
	defer close(s.served)
	l := s.lim.Listener(strict.Listen(ln, s.lim.maxBody()))
	if ll, ok := l.(*limitListener); ok && s.park != nil {
		ll.park = s.park
	}
	s.ln.Store(l)
	return s.serve(l)
}

// Requesting is how many of the server's connections began a request at
// or after since (a sock.Mono reading): a held stream or an idle
// kept-alive connection does not count.
func (s *limitedServer) Requesting(since int64) int {
	l, ok := s.ln.Load().(*limitListener)
	if !ok {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := range l.conns {
		if c.started.Load() >= since {
			n++
		}
	}
	return n
}

// Shutdown drains the server without cutting a request: it stops
// accepting, answers every request from now on with Connection: close (the
// client sends its next one elsewhere), and closes only the connections
// that carry none (one that never sent a byte after UnusedGrace, a
// kept-alive one idle for KeptGrace), until none is left but the held
// streams, which are the hub's to drain. Both servers' own shutdowns would
// close every idle kept-alive connection at once, under a client that is
// sending its next request on it. Past ctx, the server's shutdown says
// what is still in flight.
func (s *limitedServer) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	l, ok := s.ln.Load().(*limitListener)
	if !ok {
		return s.shutdown(ctx)
	}
	l.Close()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		accepting := true
		select {
		case <-s.served:
			accepting = false
		default:
		}
		if l.closeQuiet() == 0 && !accepting {
			break
		}
		select {
		case <-ctx.Done():
			l.closeWaiting()
			return s.shutdown(ctx)
		case <-tick.C:
			continue
		}
	}
	l.closeWaiting()
	return s.shutdown(ctx)
}
