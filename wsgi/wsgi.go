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
	// Threads is how many requests run the application at once, each on
	// its own OS thread. Zero means min(cores, 8). A negative value means no
	// pool: every request runs on one dedicated Python thread, and every
	// response body is buffered before it is sent.
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

	// LogPrefix begins the handler's log lines in place of "wsgi": the ASGI
	// buffered path, which runs on this bridge, says "asgi".
	LogPrefix string
}

// ErrClosed is returned by Shutdown when the handler was already shut down.
var ErrClosed = errors.New("wsgi: handler already shut down")

// New returns a handler that serves app, which must be a WSGI callable
// (m0.LoadApp found it to be one); New panics otherwise, as http.Handle
// does with a nil handler. The handler also has a method
// Shutdown(context.Context) error that stops it: it refuses new requests
// with 503, waits for the requests running Python to finish, or for ctx to
// end, and then names in its error the threads still running.
func New(app *cpython.App, opts *Options) http.Handler {
	if opts == nil {
		opts = &Options{}
	}
	if app == nil || app.Protocol != "wsgi" {
		panic("wsgi: New needs a WSGI application")
	}
	rt, err := cpython.Start()
	if err != nil {
		panic("wsgi: " + err.Error())
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
		panic("wsgi: " + err.Error())
	}
	h := &handler{
		app:     w,
		stream:  stream,
		maxBody: opts.MaxBody,
		log:     opts.Logger,
		prefix:  opts.LogPrefix,
		pool:    newPool(threads),
	}
	if !stream {
		h.one = newThread(rt)
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBody
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h
}

type handler struct {
	app     *cpython.WSGI
	pool    *pool
	one     *thread // with no pool, the one Python thread
	stream  bool    // a body without a Content-Length streams from its thread
	maxBody int64
	log     *slog.Logger
	prefix  string // Options.LogPrefix
}

// Shutdown stops the pool; see New.
func (h *handler) Shutdown(ctx context.Context) error { return h.pool.shutdown(ctx) }
