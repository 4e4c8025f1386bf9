// Command m0serve serves a Python web application from a Go process.
//
//	m0serve [flags] MODULE[:ATTR]
//
// It only wires the m0 packages together; see m0serve --help.
package main

import (
	"fmt"
	"os"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/wsgi"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	cfg, err := m0.Parse(args, os.Getenv)
	if m0.IsHelp(err) {
		m0.PrintHelp(os.Stdout)
		return m0.ExitOK
	}
	if err != nil {
		return m0.Report(os.Stderr, err)
	}
	for _, note := range cfg.Notes {
		fmt.Fprintln(os.Stderr, note)
	}
	if cfg.App == "" {
		return m0.Report(os.Stderr, &m0.UsageError{Msg: "no application given (usage: m0serve [flags] MODULE[:ATTR]; see m0serve --help)"})
	}
	app, err := m0.LoadApp(cfg.App, cfg.AppDir, cfg.Protocol)
	if err != nil {
		return m0.Report(os.Stderr, err)
	}
	if app.Protocol != "wsgi" {
		return m0.Report(os.Stderr, &m0.Refusal{
			Found: app.Spec + " is an ASGI application, and ASGI is not yet supported by this m0serve",
			Fix:   "name the WSGI callable, such as MODULE.wsgi:application, or pass --protocol wsgi if it is one",
		})
	}
	threads, _ := cfg.Threads()
	if threads == 0 {
		threads = -1 // no pool: one Python thread
	}
	h := wsgi.New(app, &wsgi.Options{Threads: threads})
	w := &m0.Worker{
		Config:   cfg,
		Spec:     app.Spec,
		Protocol: app.Protocol,
		Handler:  h,
		Drain:    []m0.Shutdowner{h.(m0.Shutdowner), m0.PythonDrain()},
	}
	return m0.Report(os.Stderr, w.Run())
}
