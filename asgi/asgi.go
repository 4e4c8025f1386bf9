// Package asgi serves a Python ASGI application (HTTP, WebSocket and
// lifespan, ASGI 3.0) as an http.Handler.
//
// The application runs on one asyncio loop (uvloop when installed) on a
// Python thread of its own; once the process has subinterpreters
// (m0serve's --interpreters), on one loop of asyncio's in each (uvloop does
// not load in a subinterpreter) and not in the main interpreter, except
// under Options.Inline, which runs on the main interpreter's loop. Go
// accepts, parses and writes; it hands the loop
// requests and events in batches, one wake-up for every event pending, and
// the scope, receive and send are built and handled in C, without Python
// wrappers. WebSocket connections live in Go (gorilla/websocket), with one
// writer goroutine each; pings are answered in Go.
package asgi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/wire"
)

// DefaultMaxBody is the request body cap of a handler made with nil
// options, as m0serve's --max-body defaults to: 4 MiB.
const DefaultMaxBody = wire.DefaultMaxBody

// DefaultCloseTimeout is how long a handler made with nil options waits
// for a WebSocket peer's close reply, as m0serve's --idle-timeout defaults
// to.
const DefaultCloseTimeout = 60 * time.Second

// Options configures an ASGI handler. A nil *Options and a zero Options
// mean the same: DefaultOptions. Each field's zero is its default, and its
// "off" a named negative.
type Options struct {
	// Loop is "auto" or "" (uvloop when it is installed, else asyncio),
	// "uvloop" (Startup fails if it is not installed) or "asyncio". Any
	// other value panics.
	Loop string

	// NoLifespan skips the lifespan protocol, as uvicorn's --lifespan off.
	// By default it runs as uvicorn's "auto": an application that does not
	// support it is served anyway.
	NoLifespan bool

	// MaxBody caps a request body, in bytes; a larger one is answered 413
	// before the application runs. Zero means DefaultMaxBody; NoMaxBody
	// (any negative) no cap.
	MaxBody int64

	// RootPath is the scope's root_path: the prefix the application is
	// mounted under, which the path still carries. The default is "".
	RootPath string

	// CloseTimeout bounds the wait for a WebSocket peer's close reply. Zero
	// means DefaultCloseTimeout; NoCloseWait (any negative) no wait.
	CloseTimeout time.Duration

	// Logger receives application errors and lifespan notes. Nil, the
	// default, means slog.Default().
	Logger *slog.Logger

	// Inline runs the handler's network on its event loop's thread
	// (m0serve's M0_INVERTED), served with ServeInline; the handler
	// serves requests handed to it (ServeHTTP, ServeFastHTTP) as well.
	// On one usable CPU give the program a second P (runtime.GOMAXPROCS,
	// as m0serve does): with the loop's P the only one, Go's monitor
	// takes it back on every request.
	Inline bool
}

// NoMaxBody, as Options.MaxBody and BufferedOptions.MaxBody (any
// negative), puts no cap on a request body.
const NoMaxBody = -1

// NoCloseWait, as Options.CloseTimeout (any negative), closes a WebSocket
// without waiting for the peer's close reply.
const NoCloseWait = -1

// DefaultOptions returns the options a nil *Options means, each default
// spelled out.
func DefaultOptions() *Options {
	return &Options{MaxBody: DefaultMaxBody, CloseTimeout: DefaultCloseTimeout}
}

// ErrClosed is returned by a second Shutdown; errors.Is finds
// http.ErrServerClosed in it, as in every m0 handler's.
var ErrClosed = wire.Closed("asgi")

// Handler serves an ASGI application. It is an http.Handler, and serves
// fasthttp's requests too (ServeFastHTTP), which m0serve uses.
type Handler struct {
	exs      []*cpython.Executor // the one executor, or one in each subinterpreter; nil when the loop did not start
	next     atomic.Uint32       // where pick starts looking, turned by each request
	startErr error               // the loop did not start
	inline   *Inline
	maxBody  int64 // -1: no cap
	rootPath string
	closeTO  time.Duration
	log      *slog.Logger
	noLife   bool        // Options.NoLifespan
	draining atomic.Bool // Drain has begun
	closed   atomic.Bool // Shutdown has begun: new requests get 503
	startLog sync.Once   // the loop's failure to start, logged once
	wsMu     sync.Mutex
	ws       map[*wsConn]struct{} // open WebSockets, closed with 1001 on drain
}

// New starts an event loop for app, which must be an ASGI callable
// (m0.LoadApp found it to be one; New panics otherwise, as http.Handle does
// with a nil handler), and returns its handler, serving. The application's
// lifespan startup begins at once; a server calls Startup before it
// listens, which waits for it and returns what failed, the loop or the
// startup. A request that arrives before is served all the same.
func New(handle *m0.App, opts *Options) *Handler {
	if opts == nil {
		opts = DefaultOptions()
	}
	app := callable(handle, "New")
	switch opts.Loop {
	case "", "auto", "uvloop", "asyncio":
	default:
		panic(fmt.Sprintf("asgi: unknown loop %q (want auto, uvloop or asyncio)", opts.Loop))
	}
	h := &Handler{
		maxBody:  wire.Setting(opts.MaxBody, DefaultMaxBody),
		rootPath: opts.RootPath,
		closeTO:  wire.Setting(opts.CloseTimeout, DefaultCloseTimeout),
		log:      opts.Logger,
		noLife:   opts.NoLifespan,
		ws:       map[*wsConn]struct{}{},
	}
	if h.maxBody == 0 {
		h.maxBody = -1
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	rt, err := cpython.Start()
	if err == nil {
		lo := cpython.LoopOptions{Loop: opts.Loop, Lifespan: !opts.NoLifespan}
		if opts.Inline {
			h.inline = newInline(h)
			lo.Inline = h.inline
		}
		if rt.Interpreters() > 0 && !opts.Inline {
			h.exs, err = rt.StartASGIInterpreters(app, lo)
		} else {
			var ex *cpython.Executor
			if ex, err = rt.StartASGI(app, lo); err == nil {
				h.exs = []*cpython.Executor{ex}
			}
		}
	}
	if err != nil {
		h.startErr = fmt.Errorf("asgi: %w", err)
	}
	return h
}

// callable is the ASGI callable behind handle; what names the constructor
// that panics without one.
func callable(handle *m0.App, what string) *cpython.App {
	app := cpython.Unwrap(handle)
	switch {
	case app == nil:
		panic("asgi: " + what + " needs an application m0.LoadApp loaded, not a nil or zero *m0.App")
	case app.Protocol != "asgi":
		panic("asgi: " + what + " needs an ASGI application (m0.LoadApp found this one to be WSGI; use wsgi.New)")
	case m0.FreeThreaded():
		// m0serve refuses this configuration with 78 before it gets here
		// (host's CheckGIL): the one rule, and its reason, are there.
		panic("asgi: " + what + " needs a GIL build of CPython, and the one loaded is free-threaded (docs/running.md, \"Free-threaded CPython\")")
	}
	return app
}

// unavailable is the status a request gets when the handler cannot serve
// it (0 when it can): 503 once Shutdown has begun, 500 when the loop did
// not start.
func (h *Handler) unavailable() int {
	switch {
	case h.closed.Load():
		return http.StatusServiceUnavailable
	case h.exs == nil:
		h.startLog.Do(func() { h.log.Error(h.startErr.Error()) })
		return http.StatusInternalServerError
	}
	return 0
}

// Loop names the event loop that resolved: "uvloop" or "asyncio"; "" when
// the loop did not start.
func (h *Handler) Loop() string {
	if h.exs == nil {
		return ""
	}
	return h.exs[0].Loop
}

// Eager reports whether requests start as eager tasks (CPython 3.12+,
// under either front end): a request whose coroutine never waits
// finishes in the loop iteration it started in.
func (h *Handler) Eager() bool { return h.exs != nil && h.exs[0].Eager }

// LoopCPU is the CPU time the threads of the handler's event loops have
// used (one a subinterpreter), while they run; on Linux only, and 0
// elsewhere. A host reads it to tell whether Python is the pace.
func (h *Handler) LoopCPU() time.Duration {
	var t time.Duration
	for _, ex := range h.exs {
		t += ex.LoopCPU()
	}
	return t
}

// LoopNetwork is the time the threads of the handler's event loops have
// spent reading, parsing and writing the inline front end's connections
// (Options.Inline; 0 without): with LoopCPU, the network's share of the
// loops' threads, which a shed (InlineOptions.Shed) moves to Go's.
func (h *Handler) LoopNetwork() time.Duration {
	var t time.Duration
	for _, ex := range h.exs {
		t += ex.Network()
	}
	return t
}

// LifespanError is a lifespan startup the application reported failed
// (lifespan.startup.failed, as Starlette and FastAPI send when a startup
// handler raises).
type LifespanError struct{ Msg string }

func (e *LifespanError) Error() string {
	if e.Msg == "" {
		return "asgi: lifespan startup failed"
	}
	return "asgi: lifespan startup failed: " + e.Msg
}

// Startup runs the application's lifespan startup and waits for it, or for
// ctx. An application without lifespan support is served anyway (one info
// line says so); one whose startup fails returns a *LifespanError.
func (h *Handler) Startup(ctx context.Context) error {
	if h.startErr != nil {
		return h.startErr
	}
	outs := make([]cpython.Outcome, len(h.exs))
	for i, ex := range h.exs { // each interpreter's startup runs at once
		o, err := ex.Startup(ctx)
		if err != nil {
			return err
		}
		outs[i] = o
	}
	switch o := cpython.Combine(outs); o.Code {
	case cpython.LifespanFailed:
		return &LifespanError{Msg: o.Msg}
	case cpython.LifespanUnsupported:
		if !h.noLife {
			noLifespan(h.log, o.Msg)
		}
	}
	return nil
}

// Drain tells every request in flight that its client is gone
// (http.disconnect; websocket.disconnect with 1001), so streaming responses
// end, and closes open WebSockets with 1001. New requests still run. A
// server calls it as its drain begins (http.Server.RegisterOnShutdown);
// Shutdown calls it too.
func (h *Handler) Drain() {
	// The close frames go out first: an application that returns when it
	// hears of the drain must not have its socket closed with 1000 before.
	h.wsMu.Lock()
	h.draining.Store(true)
	conns := make([]*wsConn, 0, len(h.ws))
	for c := range h.ws {
		conns = append(conns, c)
	}
	h.wsMu.Unlock()
	var wg sync.WaitGroup // each close frame waits at most a second for a slow peer
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.goingAway()
		}()
	}
	wg.Wait()
	for _, ex := range h.exs {
		ex.Drain()
	}
}

// Shutdown stops the handler within ctx: it answers new requests 503,
// drains (see Drain), waits for the application's tasks to end (a
// WebSocket's disconnect handling included), runs the lifespan shutdown if
// the startup completed, and stops the loop. A second Shutdown returns
// ErrClosed.
func (h *Handler) Shutdown(ctx context.Context) error {
	if !h.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if h.exs == nil {
		return nil
	}
	h.Drain()
	// The application's tasks run to their end first (a Django Channels
	// consumer's disconnect() and group_discard, say), then the lifespan
	// shutdown, then the loop stops. The tasks get the time up to a reserve
	// the lifespan shutdown keeps: half of what is left, up to a second.
	waitCtx := ctx
	if dl, ok := ctx.Deadline(); ok {
		reserve := min(time.Until(dl)/2, time.Second)
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
		defer cancel()
	}
	// Each interpreter's loop waits, shuts down and stops at once, within
	// the same time.
	outs := make([]cpython.Outcome, len(h.exs))
	errs := make([]error, 2*len(h.exs))
	var wg sync.WaitGroup
	for i, ex := range h.exs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[2*i] = ex.Wait(waitCtx)
			outs[i], errs[2*i+1] = ex.Stop(ctx)
		}()
	}
	wg.Wait()
	err := errors.Join(errs...)
	if o := cpython.Combine(outs); err == nil && o.Code == cpython.LifespanStopFailed {
		h.log.Error("asgi: lifespan shutdown failed", "error", o.Msg)
	}
	if err != nil {
		return fmt.Errorf("asgi: %w", err)
	}
	return nil
}

// pick is the executor a new request starts on: the one, or the least
// loaded of one an interpreter (the search starting one further each
// time, so that an idle server takes turns).
func (h *Handler) pick() *cpython.Executor {
	if len(h.exs) == 1 {
		return h.exs[0]
	}
	n := uint32(len(h.exs))
	i := h.next.Add(1) % n
	best := h.exs[i]
	load := best.Load()
	for k := uint32(1); k < n && load > 0; k++ {
		ex := h.exs[(i+k)%n]
		if l := ex.Load(); l < load {
			best, load = ex, l
		}
	}
	return best
}

// logError logs an application's failure: text is its traceback, or what
// the server found wrong.
func (h *Handler) logError(method, path string, text string) {
	h.log.Error("asgi: application error", append([]any{"method", method, "path", path}, cpython.LogAttrs(text)...)...)
}

// noLifespan says, in one line, that the application does not take the
// lifespan protocol (Django's ASGI handler raises for it); text is what it
// raised, of which the exception is enough.
func noLifespan(log *slog.Logger, text string) {
	var attrs []any
	if e := (&cpython.Error{Traceback: text}).Exception(); e != "" {
		attrs = append(attrs, "detail", e)
	}
	log.Info("asgi: the application does not support lifespan; serving it without", attrs...)
}
