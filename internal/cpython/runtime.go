package cpython

/*
#include <stdlib.h>
#include "m0py.h"
*/
import "C"

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

//go:embed bootstrap.py
var bootstrap string

// Runtime is the one interpreter of the process.
type Runtime struct {
	Interp Interpreter

	main Thread      // the thread that started the interpreter
	work chan func() // work for the main thread

	subs       []*subinterp // StartInterpreters's, in order
	subThreads int          // the requests each runs at once
	subsOnce   sync.Once
	subsErr    error
	imu        sync.Mutex // orders the subinterpreters' busy counts
}

// Start loads libpython and starts the interpreter, once per process; later
// calls return the same runtime (or the same error).
func Start() (*Runtime, error) { return startOnce() }

var startOnce = sync.OnceValues(func() (*Runtime, error) {
	rt, err := start()
	if err == nil {
		running.Store(rt)
	}
	return rt, err
})

// running is the runtime once Start has started it.
var running atomic.Pointer[Runtime]

// Running returns the process's runtime if Start has started it, and nil
// otherwise: it never starts one.
func Running() *Runtime { return running.Load() }

func start() (*Runtime, error) {
	in, err := Located()
	if err != nil {
		return nil, err
	}
	rt := &Runtime{Interp: in, work: make(chan func())}
	ready := make(chan error)
	go rt.mainThread(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	// Python's own start-up would ignore SIGPIPE; Py_InitializeEx(0) does
	// not. A write to a closed socket, from Go or from an extension module,
	// must fail with EPIPE, not end the process.
	signal.Ignore(syscall.SIGPIPE)
	if len(in.SitePackage) > 0 {
		// A virtualenv is normally found from the program name; adding its
		// site-packages again is a no-op then, and the fix when it was not.
		b, _ := json.Marshal(in.SitePackage)
		err := rt.Main(func(t Thread) error {
			_, err := t.CallHelperStr("_addsitedirs", string(b))
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return rt, nil
}

// mainThread starts the interpreter on an OS thread of its own, which keeps
// the main thread state for life and then runs the work given to Main.
func (rt *Runtime) mainThread(ready chan<- error) {
	runtime.LockOSThread()
	var errbuf [4096]C.char
	lib := C.CString(rt.Interp.Library)
	defer C.free(unsafe.Pointer(lib))
	ft := rt.Interp.GILDisabled || libraryFreeThreaded(rt.Interp.Library)
	if C.m0_load(lib, cbool(ft), &errbuf[0], C.size_t(len(errbuf))) != 0 {
		ready <- &LibraryError{
			Found: fmt.Sprintf("cannot load %s: %s", rt.Interp.Library, C.GoString(&errbuf[0])),
			Fix:   fixLibrary,
		}
		return
	}
	prog := C.CString(rt.Interp.Executable)
	boot := C.CString(bootstrap)
	C.m0_save_signals()
	rc := C.m0_initialize(prog, boot, &errbuf[0], C.size_t(len(errbuf)))
	C.m0_restore_signals()
	C.free(unsafe.Pointer(boot))
	if rc != 0 {
		ready <- fmt.Errorf("cpython: the interpreter did not start: %s", C.GoString(&errbuf[0]))
		return
	}
	rt.main = Thread{c: C.m0_thread_here()}
	ready <- nil
	for f := range rt.work {
		f()
	}
}

// Main runs fn on the thread that started the interpreter, the one Python
// calls its main thread (signal.signal works only there), and waits for it.
func (rt *Runtime) Main(fn func(Thread) error) error {
	done := make(chan error, 1)
	rt.work <- func() { done <- fn(rt.main) }
	return <-done
}

// RestoreSignals puts Go's signal handlers back after Python code (importing
// the application, say) may have installed its own.
func (rt *Runtime) RestoreSignals() { C.m0_restore_signals() }

// Go runs fn on a new goroutine locked to its OS thread, with that
// thread's Python thread state, and unlocks it when fn returns.
func (rt *Runtime) Go(fn func(Thread)) {
	go func() {
		t := Here()
		defer t.Release()
		fn(t)
	}()
}

// Here locks the calling goroutine to its OS thread and returns that
// thread's Python thread, made on first use and kept for the life of the
// thread. Release unlocks it. Python's thread states never move between OS
// threads: a goroutine that calls Python stays on one from the call to the
// end of its body.
func Here() Thread {
	runtime.LockOSThread()
	c := C.m0_thread_here()
	if c == nil {
		panic("cpython: cannot create a thread state")
	}
	return Thread{c: c}
}

// Thread is the Python side of an OS thread: its thread state and the
// buffers of the WSGI call in progress. It is valid on the goroutine that
// got it, until Release.
type Thread struct {
	c   *C.m0_thread
	sub *subinterp // its subinterpreter, nil in the main interpreter
}

// Current reports whether the calling goroutine may call Python on t: it
// runs on t's OS thread.
func (t Thread) Current() bool { return t.c != nil && C.m0_thread_peek(t.c.interp) == t.c }

// Zero reports whether t is no thread (WSGI.Reserve's when the call runs
// on the caller's own in the main interpreter).
func (t Thread) Zero() bool { return t.c == nil }

// Release unlocks the goroutine from its OS thread; a subinterpreter's
// thread (WSGI.Reserve's) gives its interpreter back the request's place.
func (t Thread) Release() {
	if t.sub != nil {
		running.Load().put(t.sub)
	}
	runtime.UnlockOSThread()
}

// control is a thread of t's interpreter that is not t's, for what one
// thread does to another's request: the caller's own in the main
// interpreter (released by the caller), a subinterpreter's ctl otherwise.
func (t Thread) control(f func(me Thread)) {
	if t.sub != nil {
		t.sub.ctl.do(f)
		return
	}
	me := Here()
	defer me.Release()
	f(me)
}

func (t Thread) err() error {
	return newError(C.GoStringN(t.c.err.p, C.int(t.c.err.len)))
}

func (t Thread) bodyString() string {
	return C.GoStringN(t.c.body.p, C.int(t.c.body.len))
}

// Exec runs Python source in __main__.
func (t Thread) Exec(code string) error {
	c := C.CString(code)
	defer C.free(unsafe.Pointer(c))
	if C.m0_exec(t.c, c) != 0 {
		return t.err()
	}
	return nil
}

// Eval evaluates a Python expression in __main__ and returns str() of it.
func (t Thread) Eval(expr string) (string, error) {
	c := C.CString(expr)
	defer C.free(unsafe.Pointer(c))
	if C.m0_eval_str(t.c, c) != 0 {
		return "", t.err()
	}
	return t.bodyString(), nil
}

// CallHelperStr calls _m0.NAME(arg) and returns str() of the result.
func (t Thread) CallHelperStr(name, arg string) (string, error) {
	obj, err := t.callHelper(name, arg)
	if err != nil {
		return "", err
	}
	defer t.DecRef(obj)
	return t.Str(obj)
}

func (t Thread) callHelper(name, arg string) (Object, error) {
	n, a := C.CString(name), C.CString(arg)
	defer C.free(unsafe.Pointer(n))
	defer C.free(unsafe.Pointer(a))
	var out C.uintptr_t
	if C.m0_call_helper(t.c, n, a, &out) != 0 {
		return 0, t.err()
	}
	return Object(out), nil
}

// Str returns str(obj).
func (t Thread) Str(obj Object) (string, error) {
	if C.m0_str(t.c, C.uintptr_t(obj)) != 0 {
		return "", t.err()
	}
	return t.bodyString(), nil
}

// Attr returns a new reference to getattr(obj, name).
func (t Thread) Attr(obj Object, name string) (Object, error) {
	n := C.CString(name)
	defer C.free(unsafe.Pointer(n))
	var out C.uintptr_t
	if C.m0_getattr(t.c, C.uintptr_t(obj), n, &out) != 0 {
		return 0, t.err()
	}
	return Object(out), nil
}

// AttrStr returns str(getattr(obj, name)).
func (t Thread) AttrStr(obj Object, name string) (string, error) {
	a, err := t.Attr(obj, name)
	if err != nil {
		return "", err
	}
	defer t.DecRef(a)
	return t.Str(a)
}

// DecRef lets go of a reference.
func (t Thread) DecRef(obj Object) {
	if obj != 0 {
		C.m0_decref(t.c, C.uintptr_t(obj))
	}
}

// Object is a strong reference to a Python object, as an integer handle.
type Object uintptr

// signalHandler returns the address of the process's handler for sig.
func signalHandler(sig int) uintptr { return uintptr(C.m0_signal_handler(C.int(sig))) }

// CountGILWaits turns on the timing of every wait of the server's threads
// for the GIL (GILWaits); off, the default, costs nothing per request.
func CountGILWaits(on bool) { C.m0_count_gil_waits(cbool(on)) }

// GILWaits returns how long the server's threads have waited for the GIL,
// in all, and how many times they took it, while CountGILWaits was on.
func GILWaits() (time.Duration, uint64) {
	var ns, n C.uint64_t
	C.m0_gil_wait_totals(&ns, &n)
	return time.Duration(ns), uint64(n)
}

// SetQoS gives every Python thread a nice level, and SCHED_BATCH if batch:
// the main thread at once, and each other one as it is made. The error is
// the main thread's (EPERM for a nice level below 0 without privilege).
func (rt *Runtime) SetQoS(nice int, batch bool) error {
	C.m0_set_qos(C.int(nice), cbool(batch))
	return rt.Main(func(Thread) error {
		if rc, err := C.m0_apply_qos(); rc != 0 {
			return fmt.Errorf("cpython: cannot set the scheduling class: %w", err)
		}
		return nil
	})
}
