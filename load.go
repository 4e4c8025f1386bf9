package m0

import (
	"github.com/m0serve/m0/internal/boot"
	"github.com/m0serve/m0/internal/cpython"
)

// App is a Python application callable imported into the process's
// interpreter, ready for wsgi.New or asgi.New: Spec names what discovery
// found (MODULE:ATTR) and Protocol is "wsgi" or "asgi".
type App = cpython.App

// LoadOptions configure LoadApp. A nil *LoadOptions is valid and means the
// zero value of every field.
type LoadOptions struct {
	// Dir, if not empty, is put first on sys.path: the directory the
	// application's modules are imported from, as m0serve's --app-dir.
	Dir string

	// Protocol is "wsgi" or "asgi" to serve the application as that
	// protocol whatever it looks like; empty detects it (a coroutine
	// function, or an object whose __call__ is one, is ASGI).
	Protocol string
}

// Refusal is a configuration that cannot run: no usable libpython, say.
// The m0serve command exits 78 for it, printing one line: what was found,
// then the fix in parentheses.
type Refusal = boot.Refusal

// StartupError is an application that failed to start; Detail is its
// traceback when it raised while importing.
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
	return boot.Load(spec, opts.Dir, opts.Protocol)
}
