package host

import "github.com/m0serve/m0/internal/boot"

// The errors a start-up ends with, and their exit codes (package boot).
type (
	Refusal      = boot.Refusal
	UsageError   = boot.UsageError
	StartupError = boot.StartupError
)

const (
	ExitOK      = boot.ExitOK
	ExitStartup = boot.ExitStartup
	ExitUsage   = boot.ExitUsage
	ExitConfig  = boot.ExitConfig
)

var (
	ExitCode = boot.ExitCode
	Report   = boot.Report
)
