// Command m0serve serves a Python web application from a Go process.
//
//	m0serve [flags] MODULE[:ATTR]
//	m0serve --doctor [flags] [MODULE[:ATTR]]
//
// It only wires the m0 packages together; see m0serve --help.
package main

import (
	"fmt"
	"os"

	"github.com/m0serve/m0"
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
	app := wsgi.New(plan.App, &wsgi.Options{Threads: cfg.BridgeThreads(), MaxBody: cfg.Limits().MaxBody})
	h := m0.Health(cfg.HealthPath, app)
	if cfg.Metrics {
		h = m0.Metrics(m0.MetricsPath, h)
	}
	if cfg.AccessLog {
		h = m0.AccessLog(os.Stdout, h)
	}
	w := &m0.Worker{
		Config:   cfg,
		Spec:     plan.App.Spec,
		Protocol: plan.App.Protocol,
		Handler:  h,
		Drain:    []m0.Shutdowner{app.(m0.Shutdowner), m0.PythonDrain()},
	}
	return m0.Report(os.Stderr, w.Run())
}
