package host

import (
	"fmt"
	"log/slog"
	"os"
)

// Main runs the command line args with the environment getenv for app:
// --help, the doctor, or the checks and then the application served until
// a drain. It returns the process's exit code.
func Main(args []string, getenv func(string) string, app App, wrap Wrapper) int {
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
	return Serve(cfg, getenv, app, wrap)
}

// Serve runs a parsed configuration for app: the doctor, or the checks
// and then the application, wrapped by wrap, served until a drain. Log
// lines go to stderr in m0serve's format. It returns the process's exit
// code.
func Serve(cfg *Config, getenv func(string) string, app App, wrap Wrapper) int {
	slog.SetDefault(slog.New(NewLogHandler(os.Stderr, nil)))
	for _, note := range cfg.Notes {
		fmt.Fprintln(os.Stderr, note)
	}
	plan := NewPlan(cfg, app)
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
	return Report(os.Stderr, Run(plan, app, wrap, os.Stdout, os.Stderr))
}
