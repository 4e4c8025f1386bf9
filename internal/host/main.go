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
	cfg, code, done := ParseArgs(args, getenv)
	if done {
		return code
	}
	return Serve(cfg, getenv, app, wrap)
}

// ParseArgs reads args and the M0_* variables. When done, the process ends
// with code: after --help, or a command line it could not read (reported
// on stderr, or as the doctor's JSON under --doctor).
func ParseArgs(args []string, getenv func(string) string) (cfg *Config, code int, done bool) {
	cfg, err := Parse(args, getenv)
	switch {
	case IsHelp(err):
		PrintHelp(os.Stdout)
		return nil, ExitOK, true
	case err != nil && WantsDoctor(args):
		UsageReport(err).Print(os.Stdout)
		return nil, ExitUsage, true
	case err != nil:
		return nil, Report(os.Stderr, err), true
	}
	return cfg, 0, false
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
