//go:build linux

package cpython

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/wire"
)

func startT(t testing.TB) *Runtime {
	t.Helper()
	rt, err := Start()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	dir, _ := filepath.Abs("testdata")
	if err := rt.Main(func(th Thread) error {
		return th.Exec("import sys\nif " + quote(dir) + " not in sys.path: sys.path.insert(0, " + quote(dir) + ")\nimport apps")
	}); err != nil {
		t.Fatal(err)
	}
	return rt
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "\\'") + "'" }

func loadT(t testing.TB, rt *Runtime, attr string) *WSGI {
	t.Helper()
	app, err := rt.Load("apps:"+attr, "", "")
	if err != nil {
		t.Fatalf("Load %s: %v", attr, err)
	}
	w, err := rt.NewWSGI(app, true, false)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// onThread runs fn on a fresh Python thread and waits for it.
func onThread(rt *Runtime, fn func(Thread)) {
	var wg sync.WaitGroup
	wg.Add(1)
	rt.Go(func(t Thread) { defer wg.Done(); fn(t) })
	wg.Wait()
}

// call makes a WSGI call on th's OS thread, where the caller is locked.
func call(th Thread, w *WSGI, env *Environ, body []byte, stream bool) (Result, error) {
	t, res, err := w.Call(env, body, stream)
	t.Release()
	if t.c != th.c {
		panic("the call ran on another thread")
	}
	return res, err
}

// gilFree fails the test if another thread cannot run Python within five
// seconds: the GIL was kept.
func gilFree(t *testing.T, rt *Runtime, after string) {
	t.Helper()
	done := make(chan struct{})
	rt.Go(func(th Thread) {
		th.Eval("1")
		close(done)
	})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("the GIL is still held after %s", after)
	}
}

func request(method, path string, headers ...string) *Environ {
	e := &Environ{}
	e.Add("REQUEST_METHOD", method)
	e.Add("PATH_INFO", path)
	e.Add("QUERY_STRING", "")
	e.Add("SERVER_NAME", "localhost")
	e.Add("SERVER_PORT", "80")
	e.Add("SERVER_PROTOCOL", "HTTP/1.1")
	for i := 0; i+1 < len(headers); i += 2 {
		e.AddHeader(headers[i], headers[i+1])
	}
	return e
}

func TestEval(t *testing.T) {
	rt := startT(t)
	err := rt.Main(func(th Thread) error {
		got, err := th.Eval("6*7")
		if err != nil || got != "42" {
			t.Errorf("Eval = %q, %v", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Interp.Library == "" || rt.Interp.Version == "" {
		t.Errorf("interpreter not described: %+v", rt.Interp)
	}
}

func TestExceptionCarriesTraceback(t *testing.T) {
	rt := startT(t)
	onThread(rt, func(th Thread) {
		err := th.Exec("def f():\n    raise KeyError('missing')\nf()")
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("err = %v, want *Error", err)
		}
		for _, want := range []string{"Traceback (most recent call last)", "in f", "KeyError: 'missing'"} {
			if !strings.Contains(pe.Traceback, want) {
				t.Errorf("traceback lacks %q:\n%s", want, pe.Traceback)
			}
		}
		if pe.Error() != "python: KeyError: 'missing'" {
			t.Errorf("Error() = %q", pe.Error())
		}
		// The exception's line, whatever follows it or precedes it.
		for _, c := range []struct{ code, want string }{
			{"raise ValueError('first\\nsecond')", "ValueError: first"},
			{"e = ValueError('noted')\nif hasattr(e, 'add_note'): e.add_note('a note')\nraise e", "ValueError: noted"},
			{"try:\n    {}['k']\nexcept KeyError:\n    raise RuntimeError('while handling')", "RuntimeError: while handling"},
			{"raise SystemExit", "SystemExit"},
			{"raise ValueError('LINE 1: SELECT x\\n               ^')", "ValueError: LINE 1: SELECT x"},
			{"raise ValueError('a\\n  b\\nc')", "ValueError: a"},
			{"import sys\nif sys.version_info >= (3, 11):\n    class Errors(ExceptionGroup): pass\n    raise Errors('many', [ValueError('x')])\n" +
				"raise ValueError('many (1 sub-exception)')", "many (1 sub-exception)"},
			{"import sys\nif sys.version_info >= (3, 11):\n    raise ExceptionGroup('eg', [ValueError('x'), TypeError('y')])\n" +
				"raise ValueError('eg (2 sub-exceptions)')", "(2 sub-exceptions)"},
		} {
			err := th.Exec(c.code)
			if !errors.As(err, &pe) || !strings.HasSuffix(pe.Exception(), c.want) {
				t.Errorf("%q: Exception() = %q, want it to end in %q; traceback:\n%s", c.code, pe.Exception(), c.want, pe.Traceback)
			}
		}
		gilFree(t, rt, "a failed Exec")
	})
}

func TestCallBuffered(t *testing.T) {
	rt := startT(t)
	w := loadT(t, rt, "echo_environ")
	onThread(rt, func(th Thread) {
		res, err := call(th, w, request("POST", "/caf\xc3\xa9", "X-Test", "yes"), []byte("body!"), true)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != 201 || res.Stream {
			t.Errorf("result = %+v", res)
		}
		if got, want := string(th.Body()), "POST /caf\xc3\xa9 b'body!' yes"; got != want {
			t.Errorf("body = %q, want %q", got, want)
		}
		var names []string
		wire.EachPacked(th.Head(), func(n, v []byte) { names = append(names, string(n)+": "+string(v)) })
		if len(names) != 1 || names[0] != "Content-Type: text/plain" {
			t.Errorf("headers = %q", names)
		}
	})
}

func TestCallStreams(t *testing.T) {
	rt := startT(t)
	var before string
	onThread(rt, func(th Thread) { before, _ = th.Eval("apps.closed") })
	for _, attr := range []string{"stream", "generator_app"} {
		w := loadT(t, rt, attr)
		onThread(rt, func(th Thread) {
			res, err := call(th, w, request("GET", "/"), nil, true)
			if err != nil || !res.Stream || res.Status != 200 {
				t.Fatalf("%s: Call = %+v, %v", attr, res, err)
			}
			got := string(th.Body())
			for {
				res, err = th.Next()
				if err != nil {
					t.Fatal(err)
				}
				got += string(th.Body())
				if !res.Stream {
					break
				}
			}
			if want := map[string]string{"stream": "chunk0;chunk1;chunk2;", "generator_app": "firstsecond"}[attr]; got != want {
				t.Errorf("%s: streamed %q, want %q", attr, got, want)
			}
		})
	}
	onThread(rt, func(th Thread) {
		closed, _ := th.Eval("apps.closed - " + before)
		if closed != "1" {
			t.Errorf("close() called %s times, want 1", closed)
		}
	})
}

func TestCallRejectsBadApplications(t *testing.T) {
	rt := startT(t)
	cases := []struct{ attr, want string }{
		{"raises", "ZeroDivisionError: deliberate"},
		{"non_bytes", "must be bytes, not str"},
		{"no_start", "without calling start_response"},
		{"bad_status", "malformed status"},
		{"crlf", "control character"},
	}
	for _, c := range cases {
		w := loadT(t, rt, c.attr)
		onThread(rt, func(th Thread) {
			_, err := call(th, w, request("GET", "/"), nil, true)
			var pe *Error
			if !errors.As(err, &pe) || !strings.Contains(pe.Traceback, c.want) {
				t.Errorf("%s: err = %v, want one containing %q", c.attr, err, c.want)
			}
			gilFree(t, rt, c.attr)
		})
	}
}

func TestValidatorAcceptsEnviron(t *testing.T) {
	rt := startT(t)
	w := loadT(t, rt, "validated")
	onThread(rt, func(th Thread) {
		if _, err := call(th, w, request("GET", "/"), nil, true); err != nil {
			t.Fatal(err)
		}
		if string(th.Body()) != "hello" {
			t.Errorf("body %q", th.Body())
		}
	})
}

func TestMain(m *testing.M) {
	if _, err := Start(); err != nil {
		os.Stderr.WriteString("cpython tests need a python3 with a shared libpython: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestNoLeaks calls every kind of application 100k times in all and checks
// that Python memory and the reference counts of long-lived objects are
// where they started.
func TestNoLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("100k calls")
	}
	rt := startT(t)
	apps := map[string]*WSGI{}
	for _, a := range []string{"hello", "echo_environ", "stream", "raises", "non_bytes"} {
		apps[a] = loadT(t, rt, a)
	}
	run := func(th Thread, n int) {
		for i := 0; i < n; i++ {
			for name, w := range apps {
				res, err := call(th, w, request("POST", "/x", "X-Test", "v", "X-Custom-Header", "w"), []byte("payload"), true)
				if (err != nil) != (name == "raises" || name == "non_bytes") {
					t.Fatalf("%s: err = %v", name, err)
				}
				for err == nil && res.Stream {
					res, err = th.Next()
				}
			}
		}
	}
	onThread(rt, func(th Thread) {
		run(th, 200) // warm caches
		if err := th.Exec(`import gc, sys, tracemalloc
gc.collect()
tracemalloc.start()
_refs = (sys.getrefcount(apps.hello), sys.getrefcount(sys.intern("REQUEST_METHOD")), sys.getrefcount(apps.Body))
_before = tracemalloc.get_traced_memory()[0]`); err != nil {
			t.Fatal(err)
		}
		run(th, 20000) // 5 applications: 100k calls
		got, err := th.Eval(`(gc.collect(), tracemalloc.get_traced_memory()[0] - _before, _refs == (sys.getrefcount(apps.hello), sys.getrefcount(sys.intern("REQUEST_METHOD")), sys.getrefcount(apps.Body)))[1:]`)
		th.Exec("tracemalloc.stop()")
		if err != nil {
			t.Fatal(err)
		}
		var grew int
		var same string
		if _, err := fmt.Sscanf(strings.Trim(got, "()"), "%d, %s", &grew, &same); err != nil {
			t.Fatalf("parse %q: %v", got, err)
		}
		if grew > 64<<10 {
			t.Errorf("Python memory grew by %d bytes over 100k calls", grew)
		}
		if same != "True" {
			t.Errorf("reference counts changed over 100k calls")
		}
		t.Logf("100k calls: Python memory %+d bytes", grew)
	})
}

// TestGILReleasedUnderConcurrency runs failing and succeeding calls on
// several threads at once: a GIL kept on any error path deadlocks it.
func TestGILReleasedUnderConcurrency(t *testing.T) {
	rt := startT(t)
	ok, bad := loadT(t, rt, "hello"), loadT(t, rt, "raises")
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		rt.Go(func(th Thread) {
			defer wg.Done()
			for n := 0; n < 2000; n++ {
				w := ok
				if n%2 == 1 {
					w = bad
				}
				call(th, w, request("GET", "/"), nil, true)

			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(time.Minute):
		t.Fatal("Python threads deadlocked: the GIL was kept on an error path")
	}
}

func TestSignalsStayGo(t *testing.T) {
	rt := startT(t)
	before := signalHandler(int(syscall.SIGINT))
	dir, _ := filepath.Abs("testdata")
	if _, err := rt.Load("installs_signal:app", dir, ""); err != nil {
		t.Fatal(err)
	}
	rt.Main(func(th Thread) error {
		got, _ := th.Eval("__import__('signal').getsignal(2) is __import__('signal').default_int_handler")
		if got != "True" {
			t.Errorf("the application did not install its handler (%s)", got)
		}
		return nil
	})
	if after := signalHandler(int(syscall.SIGINT)); after != before {
		t.Errorf("SIGINT handler %#x after Load, Go's was %#x", after, before)
	}
}

// TestThreadStatePerOSThread checks that every goroutine runs Python on the
// thread state of its own OS thread: Python's native thread id is the
// thread's.
func TestThreadStatePerOSThread(t *testing.T) {
	rt := startT(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		rt.Go(func(th Thread) {
			defer wg.Done()
			for n := 0; n < 50; n++ {
				got, err := th.Eval("__import__('threading').get_native_id()")
				if err != nil {
					t.Error(err)
					return
				}
				if want := strconv.Itoa(syscall.Gettid()); got != want {
					t.Errorf("Python ran on thread %s from OS thread %s", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestSIGPIPEIgnored: a write to a broken pipe from Python code fails with
// EPIPE instead of ending the process.
func TestSIGPIPEIgnored(t *testing.T) {
	rt := startT(t)
	onThread(rt, func(th Thread) {
		err := th.Exec(`import os
_r, _w = os.pipe()
os.close(_r)
try:
    os.write(_w, b"x")
    _epipe = "no error"
except BrokenPipeError:
    _epipe = "EPIPE"
finally:
    os.close(_w)`)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := th.Eval("_epipe"); got != "EPIPE" {
			t.Errorf("write to a broken pipe: %s", got)
		}
	})
}

func TestLibraryVersion(t *testing.T) {
	for lib, want := range map[string]string{
		"/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0": "3.11",
		"/opt/py/lib/libpython3.13t.so":                  "3.13",
		"/x/libpython3.so":                               "",
		"/x/libfoo.so":                                   "",
		"/opt/homebrew/lib/libpython3.12.dylib":          "3.12",
		"/x/lib/libpython3.13t.dylib":                    "3.13",
	} {
		if got := libraryVersion(lib); got != want {
			t.Errorf("libraryVersion(%s) = %q, want %q", lib, got, want)
		}
	}
}

// TestLibraryPlaces: where a libpython is looked for, from what its
// interpreter reports: Linux's LIBDIR names, and a macOS framework build's
// (Py_ENABLE_SHARED unset) libpython3.X.dylib and framework Python.
func TestLibraryPlaces(t *testing.T) {
	linux := probed{Version: "3.11.2", LibDir: "/usr/lib/x86_64-linux-gnu", LDLibrary: "libpython3.11.so", InstSoname: "libpython3.11.so.1.0"}
	want := []string{"/usr/lib/x86_64-linux-gnu/libpython3.11.so", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"}
	if got := libraryPlaces(linux); !slices.Equal(got, want) {
		t.Errorf("Linux: %q, want %q", got, want)
	}
	fw := probed{Version: "3.12.7", LibDir: "/Library/Frameworks/Python.framework/Versions/3.12/lib",
		LDLibrary: "Python.framework/Versions/3.12/Python", InstSoname: "Python.framework/Versions/3.12/Python",
		Framework: "/Library/Frameworks"}
	want = []string{
		"/Library/Frameworks/Python.framework/Versions/3.12/lib/libpython3.12.dylib",
		"/Library/Frameworks/Python.framework/Versions/3.12/Python",
	}
	if got := libraryPlaces(fw); !slices.Equal(got, want) {
		t.Errorf("a framework build: %q, want %q", got, want)
	}
}

// TestInterruptTakenBack: an interrupt that comes after a stream ended is
// never raised in the thread's later work, whether ClearInterrupt takes it
// back or the thread's next request does; one that comes while the
// generator runs ends it with GeneratorExit.
func TestInterruptTakenBack(t *testing.T) {
	rt := startT(t)
	w := loadT(t, rt, "stream")
	interrupt := func(th Thread) {
		done := make(chan bool)
		go func() { done <- th.Interrupt() }() // from another thread, as a watcher does
		if !<-done {
			t.Fatal("Interrupt found no thread state")
		}
	}
	onThread(rt, func(th Thread) {
		// After the body ended, then taken back.
		if _, err := call(th, w, request("GET", "/"), nil, false); err != nil {
			t.Fatal(err)
		}
		interrupt(th)
		th.ClearInterrupt()
		if _, err := th.Eval("sum(range(1000))"); err != nil {
			t.Fatalf("an interrupt taken back was raised: %v", err)
		}
		// After the body ended, and the next request takes it back.
		interrupt(th)
		if res, err := call(th, w, request("GET", "/"), nil, false); err != nil || res.Status != 200 {
			t.Fatalf("the next request: %+v, %v", res, err)
		}
		// While the body is produced: the generator hears it.
		res, err := call(th, w, request("GET", "/"), nil, true)
		if err != nil || !res.Stream {
			t.Fatalf("stream: %+v, %v", res, err)
		}
		interrupt(th)
		if _, err := th.Next(); err == nil || !strings.Contains(err.Error(), "GeneratorExit") {
			t.Errorf("Next after an interrupt: %v, want GeneratorExit", err)
		}
	})
}
