// Package asgi serves a Python ASGI application (HTTP, WebSocket and
// lifespan, ASGI 3.0) as an http.Handler.
//
// The application runs on one asyncio loop (uvloop when installed) on a
// Python thread of its own. Go accepts, parses and writes; it hands the loop
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/m0serve/m0/internal/cpython"
)

// DefaultMaxBody is the request body cap when Options.MaxBody is zero.
const DefaultMaxBody = 4 << 20

// Options configures an ASGI handler. A nil *Options is valid and means the
// zero value of every field.
type Options struct {
	// Loop is "auto" or "" (uvloop when it is installed, else asyncio),
	// "uvloop" (an error if it is not installed) or "asyncio".
	Loop string

	// NoLifespan skips the lifespan protocol, as uvicorn's --lifespan off.
	// By default it runs as uvicorn's "auto": an application that does not
	// support it is served anyway.
	NoLifespan bool

	// MaxBody caps a request body, in bytes; a larger one is answered 413
	// before the application runs. Zero means DefaultMaxBody; negative means
	// no cap.
	MaxBody int64

	// RootPath is the scope's root_path: the prefix the application is
	// mounted under, which the path still carries.
	RootPath string

	// CloseTimeout bounds the wait for a WebSocket peer's close reply. Zero
	// means 60 seconds; negative, no wait.
	CloseTimeout time.Duration

	// Logger receives application errors and lifespan notes. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Handler serves an ASGI application. It is an http.Handler, and serves
// fasthttp's requests too (ServeFastHTTP), which m0serve uses.
type Handler struct {
	ex       *cpython.Executor
	maxBody  int64
	rootPath string
	closeTO  time.Duration
	log      *slog.Logger
	lifespan bool        // the application's lifespan startup completed
	noLife   bool        // Options.NoLifespan
	draining atomic.Bool // Shutdown has begun
	wsMu     sync.Mutex
	ws       map[*wsConn]struct{} // open WebSockets, closed with 1001 on drain
	stopOnce sync.Once
}

// New starts the loop for app, which must be an ASGI callable (m0.LoadApp
// found it to be one), and returns its handler. Call Startup before
// serving: it runs the application's lifespan startup. One ASGI handler
// may exist per process.
func New(app *cpython.App, opts *Options) (*Handler, error) {
	if opts == nil {
		opts = &Options{}
	}
	if app == nil || app.Protocol != "asgi" {
		return nil, errors.New("asgi: New needs an ASGI application")
	}
	switch opts.Loop {
	case "", "auto", "uvloop", "asyncio":
	default:
		return nil, fmt.Errorf("asgi: unknown loop %q (want auto, uvloop or asyncio)", opts.Loop)
	}
	rt, err := cpython.Start()
	if err != nil {
		return nil, fmt.Errorf("asgi: %w", err)
	}
	ex, err := rt.StartASGI(app, cpython.LoopOptions{Loop: opts.Loop, Lifespan: !opts.NoLifespan})
	if err != nil {
		return nil, fmt.Errorf("asgi: %w", err)
	}
	h := &Handler{
		ex:       ex,
		maxBody:  opts.MaxBody,
		rootPath: opts.RootPath,
		closeTO:  opts.CloseTimeout,
		log:      opts.Logger,
		noLife:   opts.NoLifespan,
		ws:       map[*wsConn]struct{}{},
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBody
	}
	switch {
	case h.closeTO == 0:
		h.closeTO = 60 * time.Second
	case h.closeTO < 0:
		h.closeTO = 0
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h, nil
}

// Loop names the event loop that resolved: "uvloop" or "asyncio".
func (h *Handler) Loop() string { return h.ex.Loop }

// Eager reports whether requests start as eager tasks (CPython 3.12+): a
// request whose coroutine never waits finishes in the loop iteration it
// started in.
func (h *Handler) Eager() bool { return h.ex.Eager }

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
	o, err := h.ex.Startup(ctx)
	if err != nil {
		return err
	}
	switch o.Code {
	case cpython.LifespanStarted:
		h.lifespan = true
	case cpython.LifespanFailed:
		return &LifespanError{Msg: o.Msg}
	case cpython.LifespanUnsupported:
		if !h.noLife {
			attrs := []any{}
			if o.Msg != "" {
				attrs = append(attrs, "detail", o.Msg)
			}
			h.log.Info("asgi: the application does not support lifespan; serving it without", attrs...)
		}
	}
	return nil
}

// Drain tells every request in flight that its client is gone
// (http.disconnect; websocket.disconnect with 1001), so streaming responses
// end, and closes open WebSockets with 1001. New requests still run. The
// server calls it as its drain begins.
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
	h.ex.Drain()
}

// Shutdown drains (see Drain), runs the lifespan shutdown if the startup
// completed, and stops the loop, within ctx.
func (h *Handler) Shutdown(ctx context.Context) error {
	var err error
	h.stopOnce.Do(func() {
		h.Drain()
		var o cpython.Outcome
		o, err = h.ex.Stop(ctx, h.lifespan)
		if err == nil && o.Code == cpython.LifespanStopFailed {
			h.log.Error("asgi: lifespan shutdown failed", "error", o.Msg)
		}
		if err != nil {
			err = fmt.Errorf("asgi: %w", err)
		}
	})
	return err
}

func (h *Handler) logError(method, path string, msg string) {
	h.log.Error("asgi: application error", "method", method, "path", path, "error", firstLine(msg), "traceback", msg)
}

// firstLine is the last line of a traceback (the exception), or msg.
func firstLine(msg string) string {
	end := len(msg)
	for end > 0 && (msg[end-1] == '\n' || msg[end-1] == ' ') {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if msg[i] == '\n' {
			return msg[i+1 : end]
		}
	}
	return msg[:end]
}
