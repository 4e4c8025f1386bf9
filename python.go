package m0

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/m0serve/m0/internal/cpython"
)

// App is a Python application callable imported into the process's
// interpreter, ready for wsgi.New.
type App = cpython.App

// Protocols are the application protocols this build serves; discovery
// prefers a candidate of one of them.
var Protocols = []string{"wsgi", "asgi"}

// LoadApp starts the interpreter (once per process) and imports the
// application spec names (see m0serve --help for discovery). appDir, if not
// empty, goes first on sys.path; protocol ("", "wsgi" or "asgi") overrides
// detection. No usable libpython is a *Refusal; an application that fails to
// import is a *StartupError carrying its traceback.
func LoadApp(spec, appDir, protocol string) (*App, error) {
	rt, err := startPython()
	if err != nil {
		return nil, err
	}
	if appDir != "" {
		if appDir, err = filepath.Abs(appDir); err != nil {
			return nil, &StartupError{Msg: err.Error()}
		}
	}
	app, err := rt.Load(spec, appDir, protocol, Protocols...)
	if err != nil {
		var pe *cpython.Error
		if errors.As(err, &pe) {
			return nil, &StartupError{Msg: fmt.Sprintf("cannot load %s: %s", spec, pe.Error()), Detail: pe.Traceback}
		}
		return nil, &StartupError{Msg: fmt.Sprintf("cannot load %s: %v", spec, err)}
	}
	return app, nil
}

func startPython() (*cpython.Runtime, error) {
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

// PythonDrain is the drain's last step for the interpreter: it runs the
// application's atexit handlers, as a Python process that exits would, and
// flushes what Python code printed to sys.stdout and sys.stderr.
func PythonDrain() Shutdowner { return pythonDrain{} }

type pythonDrain struct{}

const exitCode = `import atexit, sys
atexit._run_exitfuncs()
for _s in (sys.stdout, sys.stderr):
    if _s is not None:
        _s.flush()`

func (pythonDrain) Shutdown(ctx context.Context) error {
	rt, err := cpython.Start()
	if err != nil {
		return nil
	}
	if ctx.Err() != nil {
		return errors.New("atexit handlers skipped: the drain's time is up")
	}
	done := make(chan error, 1)
	go func() {
		done <- rt.Main(func(t cpython.Thread) error {
			return t.Exec(exitCode)
		})
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.New("python-main still running atexit handlers")
	}
}
