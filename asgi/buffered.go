package asgi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/wsgi"
	"github.com/valyala/fasthttp"
)

// Buffered serves an ASGI application on the buffered path, m0serve's
// --blocking-threads N with N > 0: each request runs to its end on one of
// Threads pool threads, on that thread's own event loop, with its body
// buffered both ways. The scope is built from the same environ the WSGI
// bridge builds, so a header whose name holds an underscore is dropped, as
// for WSGI. Requests overlap only where they release the GIL; WebSockets
// and streaming are the executor's (New).
type Buffered struct {
	rt       *cpython.Runtime
	h        http.Handler // the WSGI bridge serving the wrapped application
	lifespan bool
}

// NewBuffered returns the buffered path's handler for app, an ASGI
// callable. opts configure the WSGI bridge it runs on (Threads must be
// above 0). Call Startup before serving.
func NewBuffered(app *cpython.App, opts *wsgi.Options) (*Buffered, error) {
	if app == nil || app.Protocol != "asgi" {
		return nil, errors.New("asgi: NewBuffered needs an ASGI application")
	}
	if opts == nil || opts.Threads <= 0 {
		return nil, errors.New("asgi: the buffered path needs a pool of at least one thread")
	}
	rt, err := cpython.Start()
	if err != nil {
		return nil, fmt.Errorf("asgi: %w", err)
	}
	wrapped, err := rt.BufferedASGI(app)
	if err != nil {
		return nil, fmt.Errorf("asgi: %w", err)
	}
	o := *opts
	o.LogPrefix = "asgi"
	return &Buffered{rt: rt, h: wsgi.New(wrapped, &o)}, nil
}

// Startup runs the application's lifespan startup on a loop of its own;
// see Handler.Startup.
func (b *Buffered) Startup(ctx context.Context) error {
	type result struct {
		o   cpython.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, err := b.rt.BufferedLifespan("startup")
		done <- result{o, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return fmt.Errorf("asgi: %w", r.err)
		}
		switch r.o.Code {
		case cpython.LifespanStarted:
			b.lifespan = true
		case cpython.LifespanFailed:
			return &LifespanError{Msg: r.o.Msg}
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Buffered) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.h.ServeHTTP(w, r) }

// ServeFastHTTP serves a request fasthttp parsed.
func (b *Buffered) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	b.h.(interface{ ServeFastHTTP(*fasthttp.RequestCtx) }).ServeFastHTTP(ctx)
}

// Shutdown stops the pool (see wsgi.New), then runs the lifespan shutdown.
func (b *Buffered) Shutdown(ctx context.Context) error {
	err := b.h.(interface{ Shutdown(context.Context) error }).Shutdown(ctx)
	if !b.lifespan {
		return err
	}
	done := make(chan error, 1)
	go func() {
		_, e := b.rt.BufferedLifespan("shutdown")
		done <- e
	}()
	select {
	case e := <-done:
		return errors.Join(err, e)
	case <-ctx.Done():
		return errors.Join(err, errors.New("the lifespan shutdown did not finish in time"))
	}
}
