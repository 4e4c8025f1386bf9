package m0

import (
	"github.com/m0serve/m0/internal/boot"
	"github.com/m0serve/m0/internal/cpython"
)

// App is a Python application callable imported into the process's
// interpreter, ready for wsgi.New or asgi.New. LoadApp returns one; the
// zero App holds no application, and a bridge's constructor given one
// panics, as http.Handle does with a nil handler.
type App struct {
	// Spec is what discovery found: MODULE:ATTR.
	Spec string
	// Protocol is "wsgi" or "asgi".
	Protocol string

	py *cpython.App // the callable, held for the life of the process
}

func init() {
	cpython.Unwrap = func(a any) *cpython.App {
		if app, ok := a.(*App); ok && app != nil {
			return app.py
		}
		return nil
	}
	cpython.Wrap = func(py *cpython.App) any { return wrap(py) }
}

func wrap(py *cpython.App) *App { return &App{Spec: py.Spec, Protocol: py.Protocol, py: py} }

// LoadOptions configure LoadApp. A nil *LoadOptions is valid and means the
// zero value of every field.
type LoadOptions struct {
	// Dir, if not empty, is put first on sys.path: the directory the
	// application's modules are imported from. Empty adds none.
	Dir string

	// Protocol is "wsgi" or "asgi" to serve the application as that
	// protocol whatever it looks like; empty detects it (a coroutine
	// function, or an object whose __call__ is one, is ASGI).
	Protocol string
}

// Refusal is a configuration that cannot run: no usable libpython, say.
// Its fields are Found (what was found) and Fix (what to do), both
// strings; its Error is one line, Found then Fix in parentheses. A program
// that serves exits 78 for it, as the m0serve command does.
type Refusal = boot.Refusal

// StartupError is an application that failed to start: Msg says how, and
// Detail is its traceback when it raised while importing ("" otherwise).
type StartupError = boot.StartupError

// LoadApp starts the interpreter (once per process) and imports the
// application spec names: MODULE:ATTR, or a bare MODULE, for which
// MODULE.asgi:application, MODULE.wsgi:application, MODULE:app,
// MODULE.main:app and MODULE:application are tried in that order
// (MODULE: with no attribute means MODULE:application). No usable libpython is a
// *Refusal; an application that fails to import is a *StartupError
// carrying its traceback.
func LoadApp(spec string, opts *LoadOptions) (*App, error) {
	if opts == nil {
		opts = &LoadOptions{}
	}
	py, err := boot.Load(spec, opts.Dir, opts.Protocol)
	if err != nil {
		return nil, err
	}
	return wrap(py), nil
}

// FreeThreaded reports whether the CPython LoadApp starts (or started) is a
// free-threaded build (Py_GIL_DISABLED, 3.13t and newer), whose threads run
// Python at once. It asks that interpreter's python3 once per process and
// does not start it; false when none is usable.
func FreeThreaded() bool {
	if rt := cpython.Running(); rt != nil {
		return rt.Interp.GILDisabled
	}
	in, err := cpython.Located()
	return err == nil && in.GILDisabled
}
