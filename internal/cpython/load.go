package cpython

import "encoding/json"

// App is an application callable imported into the interpreter.
type App struct {
	Spec     string // the MODULE:ATTR that was found, after discovery
	Protocol string // "wsgi" or "asgi"
	obj      Object // the callable, held for the life of the process
	// buffered is the key of the ASGI application Spec names, wrapped as
	// WSGI for the buffered path (BufferedASGI), in every interpreter's
	// registry; "" for an application as it was loaded.
	buffered string
	// inSubs is set once NewWSGI has imported it into the subinterpreters,
	// where it then serves.
	inSubs bool
}

// Unwrap returns the callable behind a public application handle (an
// *m0.App), or nil for none. Package m0 sets it as it initialises, so that
// the bridges reach the callable while the public type shows no field of
// this package's.
var Unwrap = func(handle any) *App { return nil }

// Wrap returns the public handle (an *m0.App) of app; package m0 sets it
// with Unwrap.
var Wrap = func(app *App) any { panic("cpython: package m0 is not linked") }

// Load imports the application a spec names. MODULE:ATTR names it outright;
// a bare MODULE tries MODULE.asgi:application, MODULE.wsgi:application,
// MODULE:app, MODULE.main:app and then MODULE:application. appDir, if not
// empty, goes first on sys.path. protocol, if not empty, overrides the
// detection (a coroutine function is ASGI, anything else WSGI). A bare
// MODULE passes over a candidate whose protocol is not in accept (or is not
// the forced one), unless no candidate is.
//
// Load runs on the main thread, so an application may install signal
// handlers while it imports; Go's are put back afterwards.
func (rt *Runtime) Load(spec, appDir, protocol string, accept ...string) (*App, error) {
	arg, _ := json.Marshal(map[string]any{"spec": spec, "app_dir": appDir, "protocol": protocol, "accept": accept})
	var app *App
	err := rt.Main(func(t Thread) error {
		defer rt.RestoreSignals()
		loaded, err := t.callHelper("_load", string(arg))
		if err != nil {
			return err
		}
		defer t.DecRef(loaded)
		a := &App{}
		if a.Spec, err = t.AttrStr(loaded, "spec"); err != nil {
			return err
		}
		if a.Protocol, err = t.AttrStr(loaded, "protocol"); err != nil {
			return err
		}
		if a.obj, err = t.Attr(loaded, "app"); err != nil {
			return err
		}
		app = a
		return nil
	})
	return app, err
}

// GILState is the interpreter's lock as it stands (whether the build is a
// free-threaded one is Interp.GILDisabled).
type GILState struct {
	Enabled bool   `json:"enabled"` // the GIL is on now (always, on a GIL build)
	By      string `json:"by"`      // on a free-threaded build, the module whose import turned it on, or PYTHON_GIL=1
}

// GIL reports the interpreter's lock: on a free-threaded build, whether an
// extension module imported with an application (Load) turned the GIL back
// on, and which.
func (rt *Runtime) GIL() (GILState, error) {
	var st GILState
	err := rt.Main(func(t Thread) error {
		s, err := t.CallHelperStr("_gil", "")
		if err != nil {
			return err
		}
		return json.Unmarshal([]byte(s), &st)
	})
	return st, err
}
