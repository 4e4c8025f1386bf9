// Package pyapp assembles what m0serve serves for a Python application:
// the bridge its protocol and the configuration choose, the static
// directories in front of it, and the middleware the flags ask for.
package pyapp

import (
	"context"
	"errors"
	"net/http"
	"os"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/asgi"
	"github.com/m0serve/m0/internal/boot"
	"github.com/m0serve/m0/internal/host"
	"github.com/m0serve/m0/metrics"
	"github.com/m0serve/m0/realtime"
	"github.com/m0serve/m0/static"
	"github.com/m0serve/m0/wsgi"
)

// Worker returns the worker that serves the application plan loaded.
func Worker(cfg *host.Config, plan *host.Plan) (*host.Worker, error) {
	w := &host.Worker{Config: cfg, Spec: plan.App.Spec, Protocol: plan.App.Protocol}
	var app http.Handler
	switch {
	case plan.App.Protocol == "asgi" && !cfg.ASGIBuffered():
		a := asgi.New(plan.App, &asgi.Options{Loop: cfg.Loop, MaxBody: cfg.MaxBody, CloseTimeout: cfg.IdleTimeout})
		app = a
		w.EventLoop = a.Loop()
		w.Ready = func(ctx context.Context) error { return lifespanErr(a.Startup(ctx)) }
		w.Draining = []func(){a.Drain}
		w.Drain = []host.Shutdowner{a, host.PythonDrain()}
	case plan.App.Protocol == "asgi":
		b := asgi.NewBuffered(plan.App, &asgi.BufferedOptions{Threads: cfg.BlockingThreads, MaxBody: cfg.MaxBody})
		app = b
		w.Ready = func(ctx context.Context) error { return lifespanErr(b.Startup(ctx)) }
		w.Drain = []host.Shutdowner{b, host.PythonDrain()}
	default:
		h := wsgi.New(plan.App, &wsgi.Options{Threads: cfg.BlockingThreads, MaxBody: cfg.MaxBody})
		app = h
		w.Drain = []host.Shutdowner{h, host.PythonDrain()}
	}
	// --realtime (WSGI only; the plan refuses it beside ASGI): the views'
	// holds, and the hub m0pub.publish reaches. The drain ends the held
	// connections first, so that clients reconnect elsewhere.
	var hub *realtime.Hub
	if cfg.Realtime {
		hub = realtime.New(&realtime.Options{ReplayFrames: cfg.ReplayFrames, Heartbeat: cfg.SSEHeartbeat,
			KeepAlive: cfg.StreamKeepAlive})
		m0.PublishTo(hub)
		app = realtime.Holds(hub, &realtime.HoldOptions{MaxMessage: cfg.MaxBody, KeepHijackedConns: host.KeepsHijackedConns})(app)
		w.Draining = append([]func(){hub.Drain}, w.Draining...)
		w.Drain = append([]host.Shutdowner{hub}, w.Drain...)
	}
	// Static directories go in front of the application, the first named
	// outermost; a miss falls through to the next, then to the application.
	var headers []static.Header
	for _, v := range cfg.StaticHeaders {
		hd, err := static.ParseHeader(v)
		if err != nil {
			return nil, &boot.UsageError{Msg: "--static-header: " + err.Error()}
		}
		headers = append(headers, hd)
	}
	dirs := cfg.StaticDirs()
	for i := len(dirs) - 1; i >= 0; i-- {
		s, err := static.New(dirs[i].Dir, &static.Options{Prefix: dirs[i].Prefix, CacheControl: cfg.StaticCacheControl,
			Headers: headers, Next: app})
		if err != nil {
			return nil, &boot.Refusal{Found: err.Error(), Fix: "name a directory this process can open"}
		}
		app = s
	}
	h := m0.Health(cfg.HealthPath)(app)
	if cfg.Metrics {
		var opts []metrics.Option
		if hub != nil {
			opts = append(opts, metrics.Realtime(hub))
		}
		h = metrics.Middleware(metrics.Path, opts...)(h)
	}
	if cfg.AccessLog {
		h = m0.AccessLog(os.Stdout)(h)
	}
	w.Handler = h
	return w, nil
}

// lifespanErr makes a failed lifespan startup a start-up error: exit 1.
func lifespanErr(err error) error {
	var le *asgi.LifespanError
	if errors.As(err, &le) {
		return &boot.StartupError{Msg: err.Error()}
	}
	return err
}
