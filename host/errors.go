package host

import (
	"github.com/m0serve/m0"
	"github.com/m0serve/m0/internal/boot"
)

// UsageError is a command line that cannot be read: exit 2. The other
// errors a start-up ends with are m0's: a *m0.Refusal (exit 78) and a
// *m0.StartupError (exit 1).
type UsageError = boot.UsageError

// The exit codes of a start-up's errors.
const (
	ExitOK      = boot.ExitOK
	ExitStartup = boot.ExitStartup
	ExitUsage   = boot.ExitUsage
	ExitConfig  = boot.ExitConfig
)

// refusal and startupError are m0's, under short names for the host's
// many uses.
type (
	refusal      = m0.Refusal
	startupError = m0.StartupError
)

var (
	codeOf = boot.ExitCode
	report = boot.Report
)
