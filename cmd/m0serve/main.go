// Command m0serve serves a Python web application from a Go process.
//
//	m0serve [flags] MODULE[:ATTR]
//	m0serve --doctor [flags] [MODULE[:ATTR]]
//
// It only wires the m0 packages together; see m0serve --help.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/asgi"
	"github.com/m0serve/m0/static"
	"github.com/m0serve/m0/wsgi"
)

func main() {
	if code, ok := m0.RunAsInit(); ok {
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := m0.Parse(args, os.Getenv)
	switch {
	case m0.IsHelp(err):
		m0.PrintHelp(os.Stdout)
		return m0.ExitOK
	case err != nil && m0.WantsDoctor(args):
		m0.UsageReport(err).Print(os.Stdout)
		return m0.ExitUsage
	case err != nil:
		return m0.Report(os.Stderr, err)
	}
	for _, note := range cfg.Notes {
		fmt.Fprintln(os.Stderr, note)
	}
	if cfg.App == "" && !cfg.Doctor {
		return m0.Report(os.Stderr, &m0.UsageError{Msg: "no application given (usage: m0serve [flags] MODULE[:ATTR]; see m0serve --help)"})
	}
	plan := m0.NewPlan(cfg)
	if cfg.Doctor {
		report := m0.NewReport(plan, os.Getenv)
		report.Print(os.Stdout)
		return report.Exit
	}
	if err := plan.Err(); err != nil {
		return m0.Report(os.Stderr, err)
	}
	if err := m0.ApplyQoS(cfg); err != nil {
		return m0.Report(os.Stderr, err)
	}
	w := &m0.Worker{Config: cfg, Spec: plan.App.Spec, Protocol: plan.App.Protocol}
	var app http.Handler
	if plan.App.Protocol == "asgi" && !cfg.ASGIBuffered() {
		closeTO := cfg.IdleTimeout
		if closeTO == 0 {
			closeTO = -1 // --idle-timeout 0: a WebSocket closes without waiting for the reply
		}
		a, err := asgi.New(plan.App, &asgi.Options{Loop: cfg.Loop, MaxBody: cfg.Limits().MaxBody, CloseTimeout: closeTO})
		if err != nil {
			return m0.Report(os.Stderr, &m0.StartupError{Msg: err.Error()})
		}
		app = a
		w.EventLoop = a.Loop()
		w.Ready = func(ctx context.Context) error { return lifespanErr(a.Startup(ctx)) }
		w.Draining = []func(){a.Drain}
		w.Drain = []m0.Shutdowner{a, m0.PythonDrain()}
	} else if plan.App.Protocol == "asgi" {
		b, err := asgi.NewBuffered(plan.App, &wsgi.Options{Threads: cfg.BridgeThreads(), MaxBody: cfg.Limits().MaxBody})
		if err != nil {
			return m0.Report(os.Stderr, &m0.StartupError{Msg: err.Error()})
		}
		app = b
		w.Ready = func(ctx context.Context) error { return lifespanErr(b.Startup(ctx)) }
		w.Drain = []m0.Shutdowner{b, m0.PythonDrain()}
	} else {
		wa := wsgi.New(plan.App, &wsgi.Options{Threads: cfg.BridgeThreads(), MaxBody: cfg.Limits().MaxBody})
		app = wa
		w.Drain = []m0.Shutdowner{wa.(m0.Shutdowner), m0.PythonDrain()}
	}
	// Static directories go in front of the application, the first named
	// outermost; a miss falls through to the next, then to the application.
	dirs := cfg.StaticDirs()
	for i := len(dirs) - 1; i >= 0; i-- {
		var headers []static.Header
		for _, v := range cfg.StaticHeaders {
			hd, err := static.ParseHeader(v)
			if err != nil {
				return m0.Report(os.Stderr, &m0.UsageError{Msg: "--static-header: " + err.Error()})
			}
			headers = append(headers, hd)
		}
		s, err := static.New(dirs[i].Dir, &static.Options{Prefix: dirs[i].Prefix, CacheControl: cfg.StaticCacheControl,
			Headers: headers, Next: app})
		if err != nil {
			return m0.Report(os.Stderr, &m0.Refusal{Found: err.Error(), Fix: "name a directory this process can open"})
		}
		app = s
	}
	h := m0.Health(cfg.HealthPath, app)
	if cfg.Metrics {
		h = m0.Metrics(m0.MetricsPath, h)
	}
	if cfg.AccessLog {
		h = m0.AccessLog(os.Stdout, h)
	}
	w.Handler = h
	return m0.Report(os.Stderr, w.Run())
}

// lifespanErr makes a failed lifespan startup a start-up error: exit 1.
func lifespanErr(err error) error {
	var le *asgi.LifespanError
	if errors.As(err, &le) {
		return &m0.StartupError{Msg: err.Error()}
	}
	return err
}
