package host

import (
	"context"
	"errors"
	"net/http"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/asgi"
	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/front"
	"github.com/m0serve/m0/internal/wire"
	"github.com/m0serve/m0/realtime"
	"github.com/m0serve/m0/wsgi"
)

// Bridge returns the handler that serves the Python application app under
// prefix ("" for the root; otherwise a path that begins with / and does
// not end with one, which the handler's requests begin with), the way the
// configuration says m0serve serves one:
//
//   - WSGI: on the loop's pool of --blocking-threads Python threads (every
//     WSGI application of the loop shares it), with --max-body, and under
//     --realtime behind the views' held streams, whose WebSocket messages
//     are posted under prefix;
//   - ASGI: on the executor's event loop (--loop, with --idle-timeout as the
//     WebSocket close wait), or with --blocking-threads N on the buffered
//     path; its lifespan startup is one of the loop's Ready steps.
//
// Each handler is drained with the loop, and the interpreter's own drain
// (the atexit handlers, then what Python printed) runs after them. A loop
// whose application called Bridge gets its held streams from it: the host
// adds none around the loop's handler, so a Go handler beside the bridges
// that answers M0-Hold wraps itself with realtime.Holds.
//
// Bridge belongs to a loop's own handler (Thread 0): a pool thread's
// handler is a Go one, and Bridge panics there, as it does for a nil or
// zero app.
func (c Context) Bridge(app *m0.App, prefix string) http.Handler {
	switch {
	case c.loop == nil:
		panic("host: Context.Bridge outside Make")
	case c.Thread > 0:
		panic("host: Context.Bridge on a pool thread's Make (Thread > 0): bridge on the loop's handler, and route to it with Mux.HandleLoop")
	case app == nil || app.Protocol == "":
		panic("host: Context.Bridge needs an application m0.LoadApp loaded, not a nil or zero *m0.App")
	}
	cfg := c.Config
	c.loop.holds = true
	switch BridgeMode(cfg, app) {
	case "buffered":
		opts := BufferedOptions(cfg, prefix)
		if cfg.Interpreters > 0 {
			// Every application shares the interpreters' places: one pool
			// admits at most that many requests, so none waits for a place
			// in an interpreter past the pool's bounds.
			opts.Pool = c.sharedPool()
		}
		b := asgi.NewBuffered(app, opts)
		c.Ready(func(ctx context.Context) error { return lifespanErr(b.Startup(ctx)) })
		if opts.Pool != nil {
			c.Drain(lifespanDrain{b}) // the pool is drained, and counted, as the pool
		} else {
			c.Drain(b)
		}
		return b
	case "executor":
		if cfg.Interpreters > 0 {
			// A loop in each subinterpreter (CheckInterpreters made them
			// and imported the application there).
			if err := startInterpreters(cfg); err != nil {
				panic("host: " + err.Error())
			}
		}
		x := asgi.New(app, ASGIOptions(cfg, prefix))
		if cfg.Inverted && prefix == "" {
			c.loop.inline = x
		}
		c.Ready(func(ctx context.Context) error { return lifespanErr(x.Startup(ctx)) })
		c.Drain(x)
		return x
	}
	opts := WSGIOptions(cfg, prefix)
	opts.Pool = c.sharedPool()
	var h http.Handler = wsgi.New(app, opts)
	if c.Hub != nil {
		// The hub drains first, so that clients reconnect elsewhere.
		h = realtime.Holds(c.Hub, HoldOptions(cfg, prefix))(h)
	}
	return h
}

// lifespanDrain is a buffered handler on the loop's shared pool, as the
// drain sees it: the pool, drained before it, is not counted twice in the
// load's figures.
type lifespanDrain struct{ b *asgi.Buffered }

func (d lifespanDrain) Shutdown(ctx context.Context) error { return d.b.Shutdown(ctx) }

// sharedPool is the loop's one pool, made on first use: the WSGI
// applications share it, and under --interpreters the buffered ASGI ones
// too (so, with the subinterpreters, CheckInterpreters made them and
// imported the applications); shutting it down stops them all.
func (c Context) sharedPool() *wsgi.Pool {
	if c.loop.pool == nil {
		cfg := c.Config
		if cfg.Interpreters > 0 {
			if err := startInterpreters(cfg); err != nil {
				panic("host: " + err.Error())
			}
		}
		c.loop.pool = wsgi.NewPool(cfg.poolThreads())
		c.loop.pool.SetMaxWait(cfg.MaxQueueWait)
		c.loop.pool.SetTimeout(cfg.Timeout, c.stuck)
		c.Drain(c.loop.pool)
	}
	return c.loop.pool
}

// BridgeMode is how Bridge serves app under the configuration c: "pool"
// (WSGI on a pool of Python threads) or "loop" (WSGI on one dedicated
// thread, --blocking-threads 0), "executor" (ASGI on the event loop) or
// "buffered" (ASGI on a pool, --blocking-threads N).
func BridgeMode(c *Config, app *m0.App) string {
	switch {
	case app != nil && app.Protocol == "asgi" && c.ASGIBuffered():
		return "buffered"
	case app != nil && app.Protocol == "asgi":
		return "executor"
	case c.BlockingThreads == 0:
		return "loop"
	}
	return "pool"
}

// ASGIBuffered reports whether an ASGI application runs on the buffered
// path (a pool of --blocking-threads N, N > 0, each request run to its end
// with its body buffered) rather than on the executor's event loop.
func (c *Config) ASGIBuffered() bool { return c.BlockingThreads > 0 }

// WSGIOptions are the WSGI bridge's options for an application served
// under prefix with the configuration c: its own pool of --blocking-threads
// (Bridge shares one between the loop's applications) and --max-body.
func WSGIOptions(c *Config, prefix string) *wsgi.Options {
	return &wsgi.Options{Threads: poolOption(c.BlockingThreads), MaxBody: wire.Off(c.MaxBody), ScriptName: prefix}
}

// poolOption is --blocking-threads (negative for auto, 0 for one dedicated
// thread) as the bridges' options count threads (0 for auto, a negative
// for no pool).
func poolOption(flag int) int {
	switch {
	case flag < 0:
		return wsgi.AutoThreads
	case flag == 0:
		return wsgi.NoPool
	}
	return flag
}

// poolThreads is a pool's size option: --blocking-threads, or under
// --interpreters that many in each interpreter.
func (c *Config) poolThreads() int {
	if c.Interpreters > 0 {
		per, _ := c.PoolSize()
		return c.Interpreters * per
	}
	return poolOption(c.BlockingThreads)
}

// PoolSize returns the number of Python threads the configuration resolves
// to, and whether it was chosen automatically.
func (c *Config) PoolSize() (n int, auto bool) {
	return wire.PoolSize(c.BlockingThreads, freeThreaded()), c.BlockingThreads < 0
}

// ASGIOptions are the ASGI executor's options for an application served
// under prefix with the configuration c: --loop, --max-body,
// --idle-timeout as the wait for a client's WebSocket close, and
// M0_INVERTED for the one application at the root.
func ASGIOptions(c *Config, prefix string) *asgi.Options {
	return &asgi.Options{Loop: c.Loop, MaxBody: wire.Off(c.MaxBody), CloseTimeout: wire.Off(c.IdleTimeout), RootPath: prefix,
		Inline: c.Inverted && prefix == ""}
}

// BufferedOptions are the buffered ASGI path's options under prefix with
// the configuration c: a pool of --blocking-threads and --max-body.
func BufferedOptions(c *Config, prefix string) *asgi.BufferedOptions {
	return &asgi.BufferedOptions{Threads: poolOption(c.BlockingThreads), MaxBody: wire.Off(c.MaxBody), MaxWait: c.MaxQueueWait, Timeout: c.Timeout, RootPath: prefix}
}

// HoldOptions are the held streams' options for the views of an
// application under prefix: --max-body bounds a WebSocket message, posted
// to the application under prefix.
func HoldOptions(c *Config, prefix string) *realtime.HoldOptions {
	return &realtime.HoldOptions{MaxMessage: c.MaxBody, MessagePath: prefix + realtime.MessagePath,
		KeepHijackedConns: front.KeepsHijackedConns}
}

// MountOptions are a hold mount's options (realtime.Hub.HoldMount): the
// grant keys, and how the front end keeps a hijacked connection.
func MountOptions(keys realtime.GrantKeys) *realtime.MountOptions {
	return &realtime.MountOptions{Keys: keys, KeepHijackedConns: front.KeepsHijackedConns}
}

// HoldMount returns the hub's hold mount at prefix with MountOptions(keys)
// (realtime.Hub.HoldMount: streams whose grants keys verify, without the
// application). Like Bridge, it tells the host the loop places its held
// streams itself, so none are added around the loop's handler.
func (c Context) HoldMount(prefix string, keys realtime.GrantKeys) http.Handler {
	if c.loop == nil || c.Hub == nil {
		panic("host: Context.HoldMount outside Make, or without a hub (--realtime)")
	}
	c.loop.holds = true
	return c.Hub.HoldMount(prefix, MountOptions(keys))
}

// lifespanErr makes a failed lifespan startup a start-up error: exit 1.
func lifespanErr(err error) error {
	var le *asgi.LifespanError
	if errors.As(err, &le) {
		return &startupError{Msg: err.Error()}
	}
	return err
}

// freeThreaded reports whether the interpreter this process started is a
// free-threaded build, whose pool threads run Python at once (a process
// that started none, a supervisor or a Go program's, has no Python pool).
func freeThreaded() bool {
	rt := cpython.Running()
	return rt != nil && rt.Interp.GILDisabled
}
