package asgi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/wsgi"
	"github.com/valyala/fasthttp"
)

// BufferedOptions configures the buffered path. A nil *BufferedOptions and
// a zero one mean the same: DefaultBufferedOptions. Each field's zero is
// its default.
type BufferedOptions struct {
	// Threads is how many requests run at once, each on a pool thread of
	// its own with its own event loop. Zero (AutoThreads) means
	// min(cores, 8), the default. A negative is no pool, which the
	// buffered path cannot run without: NewBuffered panics.
	Threads int

	// MaxBody caps a request body, in bytes; a larger one is answered 413
	// before the application runs. Zero means DefaultMaxBody; NoMaxBody
	// (any negative) no cap.
	MaxBody int64

	// MaxWait bounds how long a request waits for a pool thread when none
	// is free: past it the request is answered 503 with Retry-After. Zero,
	// the default, waits as long as the request lasts.
	MaxWait time.Duration

	// Timeout bounds how long a request may run before its response
	// begins: past it, it is interrupted, every thread's stack is logged,
	// and it is answered 504 (wsgi.Pool.SetTimeout). Zero is no bound.
	Timeout time.Duration

	// Logger receives application errors. Nil, the default, means
	// slog.Default().
	Logger *slog.Logger

	// RootPath is the scope's root_path, as Options.RootPath: a request
	// whose path is not under it is answered 404 without the application.
	RootPath string

	// Pool, when set, is a pool shared with other handlers (wsgi.NewPool,
	// as wsgi.Options.Pool); Threads, MaxWait and Timeout are then the
	// pool's.
	Pool *wsgi.Pool
}

// AutoThreads, as BufferedOptions.Threads, runs min(cores, 8) pool
// threads, as m0serve's --blocking-threads auto.
const AutoThreads = wsgi.AutoThreads

// DefaultBufferedOptions returns the options a nil *BufferedOptions and a
// zero one mean, each default spelled out.
func DefaultBufferedOptions() *BufferedOptions {
	return &BufferedOptions{Threads: AutoThreads, MaxBody: DefaultMaxBody}
}

// Buffered serves an ASGI application on the buffered path, m0serve's
// --blocking-threads N with N > 0: each request runs to its end on one of
// Threads pool threads, on that thread's own event loop, with its body
// buffered both ways. The scope is built from the same environ the WSGI
// bridge builds, so a header whose name holds an underscore is dropped, as
// for WSGI. Requests overlap only where they release the GIL; WebSockets
// and streaming are the executor's (New).
type Buffered struct {
	app      *cpython.Buffered
	h        *wsgi.Handler // the WSGI bridge serving it
	log      *slog.Logger
	lifespan bool
	shared   bool // on BufferedOptions.Pool
	closed   atomic.Bool
}

// NewBuffered returns the buffered path's handler for app, an ASGI
// callable (NewBuffered panics otherwise, as New does). Call Startup
// before serving: it runs the application's lifespan startup.
func NewBuffered(handle *m0.App, opts *BufferedOptions) *Buffered {
	if opts == nil {
		opts = DefaultBufferedOptions()
	}
	app := callable(handle, "NewBuffered")
	if opts.Threads < 0 && opts.Pool == nil {
		panic("asgi: the buffered path needs a pool (BufferedOptions.Threads above 0, or AutoThreads)")
	}
	rt, err := cpython.Start()
	if err != nil {
		panic("asgi: " + err.Error())
	}
	wrapped, err := rt.BufferedASGI(app)
	if err != nil {
		panic("asgi: " + err.Error())
	}
	h := wsgi.New(cpython.Wrap(wrapped.App).(*m0.App), &wsgi.Options{Threads: opts.Threads, MaxBody: opts.MaxBody, MaxWait: opts.MaxWait, Timeout: opts.Timeout, Logger: opts.Logger, LogPrefix: "asgi",
		ScriptName: opts.RootPath, Pool: opts.Pool})
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Buffered{app: wrapped, h: h, log: log, shared: opts.Pool != nil}
}

// Startup runs the application's lifespan startup on a loop of its own,
// and waits for it or for ctx; see Handler.Startup.
func (b *Buffered) Startup(ctx context.Context) error {
	o, err := b.phase(ctx, "startup")
	if err != nil {
		return err
	}
	switch o.Code {
	case cpython.LifespanStarted:
		b.lifespan = true
	case cpython.LifespanFailed:
		return &LifespanError{Msg: o.Msg}
	case cpython.LifespanUnsupported:
		noLifespan(b.log, o.Msg)
	}
	return nil
}

func (b *Buffered) phase(ctx context.Context, name string) (cpython.Outcome, error) {
	type result struct {
		o   cpython.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, err := b.app.Lifespan(name)
		done <- result{o, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return r.o, fmt.Errorf("asgi: %w", r.err)
		}
		return r.o, nil
	case <-ctx.Done():
		return cpython.Outcome{}, fmt.Errorf("asgi: the lifespan %s did not finish in time", name)
	}
}

// ServeHTTP serves a request that net/http parsed.
// Stats returns the counts of the handler's pool.
func (b *Buffered) Stats() wsgi.PoolStats { return b.h.Stats() }

func (b *Buffered) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.h.ServeHTTP(w, r) }

// ServeFastHTTP serves a request fasthttp parsed.
func (b *Buffered) ServeFastHTTP(ctx *fasthttp.RequestCtx) { b.h.ServeFastHTTP(ctx) }

// Shutdown stops the pool (see wsgi.Handler.Shutdown), then runs the
// lifespan shutdown, within ctx. A shared pool (BufferedOptions.Pool) that
// was shut down already is no error: the lifespan shutdown runs alone. A
// second Shutdown returns ErrClosed.
func (b *Buffered) Shutdown(ctx context.Context) error {
	if !b.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	err := b.h.Shutdown(ctx)
	if b.shared && errors.Is(err, wsgi.ErrClosed) {
		err = nil
	}
	if !b.lifespan {
		return err
	}
	o, e := b.phase(ctx, "shutdown")
	if e == nil && o.Code == cpython.LifespanStopFailed {
		e = fmt.Errorf("asgi: lifespan shutdown failed: %s", o.Msg)
	}
	return errors.Join(err, e)
}
