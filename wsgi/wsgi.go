// Package wsgi serves a Python WSGI application (PEP 3333) as an http.Handler.
//
// Go accepts, parses and writes; the application runs on at most Threads
// Python threads at once. A request runs it on its own goroutine's OS
// thread, which keeps one Python thread state for life, so nothing is
// handed between threads. A slow view holds its thread, never the
// connections behind it: when every thread is busy, requests wait in Go.
package wsgi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime"

	"github.com/m0serve/m0/internal/cpython"
)

// DefaultMaxBody is the request body cap when Options.MaxBody is zero.
const DefaultMaxBody = 4 << 20

// Options configures a WSGI handler. A nil *Options is valid and means the
// zero value of every field.
type Options struct {
	// Threads is the number of Python threads that run the application.
	// Zero means min(cores, 8). A negative value means no pool: one Python
	// thread, and every response body buffered before it is sent.
	Threads int

	// MaxBody caps a request body, in bytes; a larger one is answered 413
	// before the application runs. Zero means DefaultMaxBody; negative means
	// no cap.
	MaxBody int64

	// Multiprocess is the value of wsgi.multiprocess: true when other
	// processes serve the same application.
	Multiprocess bool

	// Logger receives application errors. Nil means slog.Default().
	Logger *slog.Logger
}

// ErrClosed is returned by Shutdown when the handler was already shut down.
var ErrClosed = errors.New("wsgi: handler already shut down")

// New returns a handler that serves app, which must be a WSGI callable.
// The handler also has a method Shutdown(context.Context) error that stops
// the pool: it refuses new requests with 503, waits for the threads to
// finish the requests they are running, or for ctx to end, and then names
// in its error the threads still running.
func New(app *cpython.App, opts *Options) (http.Handler, error) {
	if opts == nil {
		opts = &Options{}
	}
	if app == nil || app.Protocol != "wsgi" {
		return nil, errors.New("wsgi: the application is not a WSGI callable")
	}
	rt, err := cpython.Start()
	if err != nil {
		return nil, err
	}
	threads, stream := opts.Threads, true
	switch {
	case threads == 0:
		threads = min(runtime.NumCPU(), 8)
	case threads < 0:
		threads, stream = 1, false
	}
	w, err := rt.NewWSGI(app, threads > 1, opts.Multiprocess)
	if err != nil {
		return nil, err
	}
	h := &handler{
		app:     w,
		stream:  stream,
		maxBody: opts.MaxBody,
		log:     opts.Logger,
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBody
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.pool = newPool(threads)
	return h, nil
}

type handler struct {
	app     *cpython.WSGI
	pool    *pool
	stream  bool // a body without a Content-Length streams from its thread
	maxBody int64
	log     *slog.Logger
}

// Shutdown stops the pool; see New.
func (h *handler) Shutdown(ctx context.Context) error { return h.pool.shutdown(ctx) }
