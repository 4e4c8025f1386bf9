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
	if fh, ok := h.(FastHandler); ok {
		srv := FastServer(fh, lim)
		return &limitedServer{serve: srv.Serve, shutdown: srv.ShutdownWithContext, lim: lim}
	}
	srv := netLimits(h, lim)
	return &limitedServer{serve: srv.Serve, shutdown: srv.Shutdown, lim: lim}
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
	ln       atomic.Value // the net.Listener served
}

func (s *limitedServer) Serve(ln net.Listener) error {
	l := s.lim.Listener(strict.Listen(ln, s.lim.maxBody()))
	s.ln.Store(l)
	return s.serve(l)
}

func (s *limitedServer) Shutdown(ctx context.Context) error {
	return drainUnused(ctx, s.ln.Load(), s.shutdown)
}

// drainUnused runs a server's shutdown, closing meanwhile every connection
// that never sent a byte: both servers otherwise wait on such a connection
// for seconds, though it carries no request.
func drainUnused(ctx context.Context, ln any, shutdown func(context.Context) error) error {
	l, ok := ln.(*limitListener)
	if !ok {
		return shutdown(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- shutdown(ctx) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		l.closeUnused()
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
	}
}
