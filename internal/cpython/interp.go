package cpython

/*
#include <stdlib.h>
#include "m0py.h"
*/
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// A subinterpreter of StartInterpreters: its own GIL, its own objects. Its
// requests run on the goroutines that parsed them, each on its own OS
// thread's thread state in the interpreter (m0_thread_in), as the main
// interpreter's do: no hand-off. One thread of its own, ctl, made it and
// does what is not a request (loading an application, interrupting a
// request, the atexit handlers).
type subinterp struct {
	k     int           // its slot in the C side's table (1 or more)
	ctl   *control      // the thread that made it
	slots chan struct{} // a token for each request it runs at once
	busy  int           // requests it runs or waits to, under Runtime.imu
}

// control is a subinterpreter's control thread, for life: a goroutine
// locked to an OS thread that runs what it is handed, one caller at a
// time.
type control struct {
	t    Thread
	mu   sync.Mutex
	work chan func()
	done chan struct{}
}

// MaxInterpreters is the most subinterpreters StartInterpreters makes.
const MaxInterpreters = C.M0_MAX_INTERPS - 1

// startControl makes sub's interpreter on an OS thread locked for life,
// which then runs what do hands it.
func startControl(sub *subinterp) (*control, error) {
	c := &control{work: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		// Locked for life: the thread ends with the goroutine, and no
		// other goroutine ever runs on it.
		runtime.LockOSThread()
		var errbuf [4096]C.char
		boot := C.CString(bootstrap)
		k := C.m0_interp_new(boot, &errbuf[0], C.size_t(len(errbuf)))
		C.free(unsafe.Pointer(boot))
		if k < 0 {
			ready <- fmt.Errorf("cpython: cannot make a subinterpreter: %s", C.GoString(&errbuf[0]))
			return
		}
		sub.k = int(k)
		c.t = Thread{c: C.m0_thread_in(k), sub: sub}
		ready <- nil
		for f := range c.work {
			f()
		}
	}()
	return c, <-ready
}

// do runs f on the control thread and waits for it.
func (c *control) do(f func(Thread)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.work <- func() { f(c.t); c.done <- struct{}{} }
	<-c.done
}

// StartInterpreters makes n subinterpreters (where OwnGILInterpreters),
// each with its own GIL and running at most threads WSGI requests at once,
// once per process: from then on every WSGI application NewWSGI prepares is
// imported into each of them too and its requests run there, in the least
// busy, and never in the main interpreter; package asgi starts an ASGI
// application's executor in each (StartASGIInterpreters). A later call returns the first one's
// error, or nil.
func (rt *Runtime) StartInterpreters(n, threads int) error {
	rt.subsOnce.Do(func() { rt.subsErr = rt.startInterpreters(n, threads) })
	return rt.subsErr
}

func (rt *Runtime) startInterpreters(n, threads int) error {
	if why := rt.Interp.WhyNoInterpreters(); why != "" {
		return errors.New("cpython: " + why)
	}
	if n < 1 || threads < 1 {
		return fmt.Errorf("cpython: %d interpreters of %d threads", n, threads)
	}
	if n > MaxInterpreters {
		return fmt.Errorf("cpython: at most %d interpreters", MaxInterpreters)
	}
	subs := make([]*subinterp, n)
	for i := range subs {
		s := &subinterp{slots: make(chan struct{}, threads)}
		ctl, err := startControl(s)
		if err != nil {
			return err
		}
		s.ctl = ctl
		var kerr error
		ctl.do(func(t Thread) { kerr = setKeys(t) })
		if kerr != nil {
			return kerr
		}
		subs[i] = s
	}
	rt.subs, rt.subThreads = subs, threads
	return nil
}

// Interpreters is the number of subinterpreters StartInterpreters made,
// 0 without.
func (rt *Runtime) Interpreters() int { return len(rt.subs) }

// EachInterpreter runs fn on every subinterpreter at once, each on the
// thread that made it, and waits for them all; the first error is
// returned.
func (rt *Runtime) EachInterpreter(fn func(Thread) error) error {
	errs := make([]error, len(rt.subs))
	var wg sync.WaitGroup
	for i, s := range rt.subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.ctl.do(func(t Thread) { errs[i] = fn(t) })
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// reserve locks the calling goroutine to its OS thread and returns that
// thread's thread state in the least busy subinterpreter, once it may run
// one more request there.
func (rt *Runtime) reserve() Thread {
	rt.imu.Lock()
	best := rt.subs[0]
	for _, s := range rt.subs[1:] {
		if s.busy < best.busy {
			best = s
		}
	}
	best.busy++
	rt.imu.Unlock()
	best.slots <- struct{}{}
	runtime.LockOSThread()
	c := C.m0_thread_in(C.int(best.k))
	if c == nil {
		runtime.UnlockOSThread()
		rt.put(best)
		panic("cpython: cannot create a thread state in a subinterpreter")
	}
	return Thread{c: c, sub: best}
}

// put gives back what reserve took in s.
func (rt *Runtime) put(s *subinterp) {
	<-s.slots
	rt.imu.Lock()
	s.busy--
	rt.imu.Unlock()
}

// subApp is an application imported into one subinterpreter, and a WSGI
// application's environ template there.
type subApp struct {
	app, tmpl Object
}

// ExtensionError is an application whose import in a subinterpreter failed
// on an extension module that does not support subinterpreters (a
// single-phase-init module: pydantic_core, orjson, psycopg2, ...).
type ExtensionError struct {
	Module string // the module CPython named
	Err    error  // the import's traceback
}

func (e *ExtensionError) Error() string {
	return fmt.Sprintf("the extension module %s does not support subinterpreters", e.Module)
}

func (e *ExtensionError) Unwrap() error { return e.Err }

var refusedModule = regexp.MustCompile(`module (\S+) does not support loading in subinterpreters`)

// CheckInSubinterpreters imports app into every subinterpreter, as NewWSGI
// will: an *ExtensionError names an extension module that refused.
func (rt *Runtime) CheckInSubinterpreters(app *App) error {
	apps, err := rt.loadSubs(app)
	if err != nil {
		return err
	}
	return rt.EachInterpreter(func(t Thread) error {
		a := apps[t.c.interp-1]
		t.DecRef(a.app)
		t.DecRef(a.tmpl)
		return nil
	})
}

// loadSubs imports app into every subinterpreter, at once, with the main
// interpreter's sys.path, and makes each a WSGI application's environ
// template.
func (rt *Runtime) loadSubs(app *App) ([]subApp, error) {
	multithread := rt.subThreads > 1
	var path string
	err := rt.Main(func(t Thread) error {
		var err error
		path, err = t.Eval("__import__('json').dumps(__import__('sys').path)")
		return err
	})
	if err != nil {
		return nil, err
	}
	protocol := app.Protocol
	if app.buffered != "" {
		protocol = "asgi" // the application the wrapper wraps
	}
	arg, _ := json.Marshal(map[string]any{"spec": app.Spec, "app_dir": "", "protocol": protocol,
		"sys_path": json.RawMessage(path)})
	wrap, _ := json.Marshal(map[string]string{"spec": app.Spec, "id": app.buffered})
	apps := make([]subApp, len(rt.subs))
	err = rt.EachInterpreter(func(t Thread) error {
		a := &apps[t.c.interp-1]
		loaded, err := t.callHelper("_load", string(arg))
		if err != nil {
			if m := refusedModule.FindStringSubmatch(err.Error()); m != nil {
				return &ExtensionError{Module: strings.Trim(m[1], "'\""), Err: err}
			}
			return err
		}
		defer t.DecRef(loaded)
		if app.buffered != "" {
			// An ASGI application on the buffered path: wrapped as WSGI
			// here as in the main interpreter, under the same key.
			if a.app, err = t.callHelper("_asgi_buffered_as", string(wrap)); err != nil {
				return err
			}
		} else if a.app, err = t.Attr(loaded, "app"); err != nil {
			return err
		}
		if app.Protocol == "asgi" {
			return nil // served by an executor there: no environ
		}
		// Every interpreter is a process of its own to the application.
		a.tmpl = Object(C.m0_wsgi_template(t.c, cbool(multithread), 1))
		if a.tmpl == 0 {
			return t.err()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return apps, nil
}

// setKeys interns the environ keys in t's interpreter.
func setKeys(t Thread) error {
	packed := strings.Join(EnvironKeys, "\x00") + "\x00"
	if C.m0_wsgi_set_keys(t.c, (*C.char)(unsafe.Pointer(unsafe.StringData(packed))),
		C.size_t(len(packed)), C.int(len(EnvironKeys))) != 0 {
		return t.err()
	}
	return nil
}
