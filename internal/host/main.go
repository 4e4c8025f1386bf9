package host

import (
	"fmt"
	"log/slog"
	"os"
)

// Main runs the command line args with the environment getenv: --help,
// the doctor, or the configuration's checks and then the worker build
// makes for it, served until a drain. It returns the process's exit code.
func Main(args []string, getenv func(string) string, build func(*Config, *Plan) (*Worker, error)) int {
	slog.SetDefault(slog.New(NewLogHandler(os.Stderr, nil)))
	cfg, err := Parse(args, getenv)
	switch {
	case IsHelp(err):
		PrintHelp(os.Stdout)
		return ExitOK
	case err != nil && WantsDoctor(args):
		UsageReport(err).Print(os.Stdout)
		return ExitUsage
	case err != nil:
		return Report(os.Stderr, err)
	}
	for _, note := range cfg.Notes {
		fmt.Fprintln(os.Stderr, note)
	}
	if cfg.App == "" && !cfg.Doctor {
		return Report(os.Stderr, &UsageError{Msg: "no application given (usage: m0serve [flags] MODULE[:ATTR]; see m0serve --help)"})
	}
	plan := NewPlan(cfg)
	if cfg.Doctor {
		report := NewReport(plan, getenv)
		report.Print(os.Stdout)
		return report.Exit
	}
	if err := plan.Err(); err != nil {
		return Report(os.Stderr, err)
	}
	if err := ApplyQoS(cfg); err != nil {
		return Report(os.Stderr, err)
	}
	w, err := build(cfg, plan)
	if err != nil {
		return Report(os.Stderr, err)
	}
	return Report(os.Stderr, w.Run())
}
