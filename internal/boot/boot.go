// Package boot starts the interpreter and loads the application, and names
// the errors a start-up can end with: each carries the exit code the
// process ends with, and the operator reads it as one line.
package boot

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/m0serve/m0/internal/cpython"
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

// Python starts the interpreter, once per process: no usable libpython is
// a *Refusal, any other failure a *StartupError.
func Python() (*cpython.Runtime, error) {
	rt, err := cpython.Start()
	var le *cpython.LibraryError
	if errors.As(err, &le) {
		return nil, &Refusal{Found: le.Found, Fix: le.Fix}
	}
	if err != nil {
		return nil, &StartupError{Msg: err.Error()}
	}
	return rt, nil
}

// Protocols are the application protocols this build serves; discovery
// prefers a candidate of one of them.
var Protocols = []string{"wsgi", "asgi"}

// Load starts the interpreter and imports the application spec names. dir,
// if not empty, goes first on sys.path; protocol ("", "wsgi" or "asgi")
// overrides detection. No usable libpython is a *Refusal; an application
// that fails to import is a *StartupError carrying its traceback.
func Load(spec, dir, protocol string) (*cpython.App, error) {
	switch protocol {
	case "", "wsgi", "asgi":
	default:
		return nil, fmt.Errorf("m0: unknown protocol %q (want wsgi, asgi, or empty to detect it)", protocol)
	}
	rt, err := Python()
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, &StartupError{Msg: err.Error()}
		}
	}
	app, err := rt.Load(spec, dir, protocol, Protocols...)
	if err != nil {
		var pe *cpython.Error
		if errors.As(err, &pe) {
			return nil, &StartupError{Msg: fmt.Sprintf("cannot load %s: %s", spec, pe.Error()), Detail: pe.Traceback}
		}
		return nil, &StartupError{Msg: fmt.Sprintf("cannot load %s: %v", spec, err)}
	}
	return app, nil
}
