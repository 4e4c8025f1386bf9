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
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/wire"
)

// DefaultMaxBody is the request body cap of a handler made with nil
// options, as m0serve's --max-body defaults to: 4 MiB.
const DefaultMaxBody = wire.DefaultMaxBody

// AutoThreads, as Options.Threads and NewPool's count, runs min(cores, 8)
// Python threads: the default.
const AutoThreads = 0

// NoPool, as Options.Threads and NewPool's count (any negative), runs
// every request on one dedicated Python thread, each response body
// buffered before it is sent.
const NoPool = -1

// NoMaxBody, as Options.MaxBody (any negative), puts no cap on a request
// body.
const NoMaxBody = -1

// Options configures a WSGI handler. A nil *Options and a zero Options
// mean the same: the defaults, a pool of AutoThreads and a DefaultMaxBody
// cap. Each field's "off" is a named negative.
type Options struct {
	// Threads is how many requests run the application at once, each on
	// its own OS thread; a response body without a Content-Length streams
	// from its thread. Zero (AutoThreads) means min(cores, 8), the
	// default; NoPool (any negative) one dedicated Python thread on which
	// every request runs, every response body buffered before it is sent.
	Threads int

	// MaxBody caps a request body, in bytes; a larger one is answered 413
	// before the application runs. Zero means DefaultMaxBody; NoMaxBody
	// (any negative) no cap.
	MaxBody int64

	// Multiprocess is the value of wsgi.multiprocess: true when other
	// processes serve the same application. The default is false.
	Multiprocess bool

	// Logger receives application errors. Nil, the default, means
	// slog.Default().
	Logger *slog.Logger

	// LogPrefix begins the handler's log lines in place of "wsgi": the ASGI
	// buffered path, which runs on this bridge, says "asgi".
	LogPrefix string

	// Pool, when set, is the pool of Python threads the handler runs on,
	// shared with other handlers (NewPool); Threads is then the pool's.
	// Shutting down one handler on a shared pool stops them all. The
	// default, nil, is a pool of the handler's own, of Threads threads.
	Pool *Pool

	// MaxWait bounds how long a request waits for a thread of the
	// handler's own pool when none is free: past it the request is
	// answered 503 with Retry-After, before the application sees it. Zero,
	// the default, waits as long as the request lasts. A shared pool's is
	// its own (Pool.SetMaxWait).
	MaxWait time.Duration

	// Timeout bounds how long a request may run the application on the
	// handler's own pool before its response begins (Pool.SetTimeout):
	// past it, it is interrupted, every thread's stack is logged, and it is
	// answered 504. Zero, the default, is no bound.
	Timeout time.Duration

	// ScriptName is SCRIPT_NAME: the prefix the application is mounted
	// under ("/flask"; trailing slashes are dropped), decoded as PATH_INFO
	// is (not percent-encoded). PATH_INFO is then what
	// follows it, so the application's URLs (url_for, reverse) carry the
	// prefix; a request whose path is not under it is answered 404 without
	// the application. The default is "": mounted at the root.
	ScriptName string
}

// DefaultOptions returns the options a nil *Options means, each default
// spelled out.
func DefaultOptions() *Options {
	return &Options{Threads: AutoThreads, MaxBody: DefaultMaxBody}
}

// Stats returns the counts of the pool the handler runs on (shared or its
// own).
func (h *Handler) Stats() PoolStats { return h.pool.Stats() }

// ErrClosed is returned by a second Shutdown; errors.Is finds
// http.ErrServerClosed in it, as in every m0 handler's.
var ErrClosed = wire.Closed("wsgi")

// Handler serves a WSGI application: an http.Handler, which also serves
// requests fasthttp parsed (ServeFastHTTP), as m0serve does.
type Handler struct {
	app     *cpython.WSGI
	pool    *Pool // its own, or shared (Options.Pool)
	maxBody int64 // -1: no cap
	log     *slog.Logger
	prefix  string // Options.LogPrefix
	script  string // Options.ScriptName
}

// New returns a handler that serves app, which must be a WSGI callable
// (m0.LoadApp found it to be one): New panics otherwise, as http.Handle
// does with a nil handler.
func New(handle *m0.App, opts *Options) *Handler {
	if opts == nil {
		opts = DefaultOptions()
	}
	if opts.ScriptName != "" && opts.ScriptName[0] != '/' {
		panic("wsgi: Options.ScriptName is a path that begins with /, not " + strconv.Quote(opts.ScriptName))
	}
	app := cpython.Unwrap(handle)
	switch {
	case app == nil:
		panic("wsgi: New needs an application m0.LoadApp loaded, not a nil or zero *m0.App")
	case app.Protocol != "wsgi":
		panic("wsgi: New needs a WSGI application (m0.LoadApp found this one to be ASGI; use asgi.New)")
	}
	rt, err := cpython.Start()
	if err != nil {
		panic("wsgi: " + err.Error())
	}
	p := opts.Pool
	if p == nil {
		p = NewPool(opts.Threads)
		p.SetMaxWait(opts.MaxWait)
		p.SetTimeout(opts.Timeout, nil)
	}
	w, err := rt.NewWSGI(app, p.slots.n > 1, opts.Multiprocess)
	if err != nil {
		panic("wsgi: " + err.Error())
	}
	h := &Handler{
		app:     w,
		maxBody: wire.Setting(opts.MaxBody, DefaultMaxBody),
		log:     opts.Logger,
		prefix:  opts.LogPrefix,
		script:  strings.TrimRight(opts.ScriptName, "/"),
		pool:    p,
	}
	if h.maxBody == 0 {
		h.maxBody = -1
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h
}

// Shutdown stops the handler: it answers new requests 503, waits for the
// requests running Python to finish, or for ctx to end, and then names in
// its error the threads still running. A second Shutdown returns
// ErrClosed. On a shared pool it is the pool's Shutdown: every handler on
// the pool stops.
func (h *Handler) Shutdown(ctx context.Context) error { return h.pool.Shutdown(ctx) }

// Cutoff is the pool's (Pool.Cutoff): the requests waiting for a thread
// are answered 503 now.
func (h *Handler) Cutoff() { h.pool.Cutoff() }
