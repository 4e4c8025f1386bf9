// Package m0 is the host of the m0 server: its configuration (flags over
// M0_* variables over defaults), exit codes, listeners and drain. A Go
// program that mounts the m0 handlers uses it for the same behaviour
// m0serve has.
package m0

import (
	"errors"
	"fmt"
	"io"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitStartup = 1  // the application failed to start
	ExitUsage   = 2  // the command line is wrong
	ExitConfig  = 78 // a configuration that cannot run (EX_CONFIG)
)

// Refusal is a configuration that cannot run: exit 78 with one line, what
// was found and then the fix in parentheses.
type Refusal struct {
	Found string
	Fix   string
}

func (r *Refusal) Error() string { return r.Found + " (" + r.Fix + ")" }

// UsageError is a command line that cannot be read: exit 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// StartupError is an application that failed to start: exit 1. Detail, if
// set, is printed after the message (a traceback).
type StartupError struct {
	Msg    string
	Detail string
}

func (e *StartupError) Error() string { return e.Msg }

// ExitCode maps an error to the process exit code it causes.
func ExitCode(err error) int {
	var r *Refusal
	var u *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &r):
		return ExitConfig
	case errors.As(err, &u):
		return ExitUsage
	default:
		return ExitStartup
	}
}

// Report prints err to w the way the operator sees it and returns its exit
// code: a refusal or usage error as one line, a startup failure with its
// detail below it.
func Report(w io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(w, "m0serve: %s\n", err)
	var s *StartupError
	if errors.As(err, &s) && s.Detail != "" {
		fmt.Fprintln(w, s.Detail)
	}
	return ExitCode(err)
}
