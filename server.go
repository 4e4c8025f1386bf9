package m0

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
)

// FastHandler is a handler that can also serve requests fasthttp parsed,
// as the WSGI bridge can. A worker whose handler is one serves with
// fasthttp, which costs a third of net/http per request; any other handler
// is served by net/http.
type FastHandler interface {
	http.Handler
	ServeFastHTTP(ctx *fasthttp.RequestCtx)
}

// server is the part of the HTTP server a worker drives.
type server interface {
	Serve(ln net.Listener) error
	Shutdown(ctx context.Context) error
}

// IdleTimeout closes a keep-alive connection idle that long.
const IdleTimeout = 60 * time.Second

func newServer(h http.Handler) server {
	if fh, ok := h.(FastHandler); ok {
		return &fastServer{srv: FastServer(fh)}
	}
	return &http.Server{Handler: h, IdleTimeout: IdleTimeout}
}

// FastServer returns the fasthttp server m0serve serves h with.
func FastServer(h FastHandler) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:               h.ServeFastHTTP,
		IdleTimeout:           IdleTimeout,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		// The application parses its own bodies, byte for byte.
		DisablePreParseMultipartForm: true,
		// Request line and headers up to 16 KiB (an 8 KiB cookie fits).
		ReadBufferSize: 16 << 10,
		// fasthttp reads a body whole before the handler runs, so its
		// cap is the default --max-body; the handler checks its own.
		MaxRequestBodySize: 4 << 20,
		Logger:             log.New(io.Discard, "", 0),
	}
}

type fastServer struct{ srv *fasthttp.Server }

func (s *fastServer) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

func (s *fastServer) Shutdown(ctx context.Context) error { return s.srv.ShutdownWithContext(ctx) }
