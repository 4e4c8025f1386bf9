//go:build linux

package cpython

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// inOwnProcess runs the calling test again in a process of its own, and
// reports whether this is that process: subinterpreters, once made, take
// every later NewWSGI of the process, so they must not meet the package's
// other tests.
func inOwnProcess(t *testing.T) bool {
	if os.Getenv("M0_TEST_OWN_PROCESS") == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "M0_TEST_OWN_PROCESS="+t.Name())
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("%s in a process of its own: %v", t.Name(), err)
	}
	return false
}

// withInterpreters is the runtime with n subinterpreters of threads each,
// in the test's own process (nil in the parent, which has run it there);
// the test is skipped where CPython has none.
func withInterpreters(t *testing.T, n, threads int) *Runtime {
	if !inOwnProcess(t) {
		return nil
	}
	rt := startT(t)
	if !rt.Interp.OwnGILInterpreters() {
		t.Skip("needs CPython 3.13 or newer, a GIL build")
	}
	if err := rt.StartInterpreters(n, threads); err != nil {
		t.Fatal(err)
	}
	return rt
}

// bodyOf makes a buffered call on a thread Reserve picks and returns its body.
func bodyOf(t testing.TB, w *WSGI) string {
	th, res, err := w.Call(request("GET", "/"), nil, false)
	defer th.Release()
	if err != nil || res.Status != 200 {
		t.Fatalf("call: %+v, %v", res, err)
	}
	return string(th.Body())
}

// TestInterpreters serves from two subinterpreters of two threads each:
// every request runs in one of them (never in the main interpreter), both
// take requests, a stream runs on the thread that began it, _m0 works in
// each, an interrupt reaches a subinterpreter's request, and an
// application that imports an extension module without subinterpreter
// support is refused by name.
func TestInterpreters(t *testing.T) {
	if !inOwnProcess(t) {
		return
	}
	rt := startT(t)
	if !rt.Interp.OwnGILInterpreters() {
		err := rt.StartInterpreters(2, 2)
		if err == nil || !strings.Contains(err.Error(), rt.Interp.WhyNoInterpreters()) {
			t.Fatalf("StartInterpreters on %s: %v, want a refusal", rt.Interp.Version, err)
		}
		return
	}
	if err := rt.StartInterpreters(2, 2); err != nil {
		t.Fatal(err)
	}
	if rt.Interpreters() != 2 {
		t.Fatalf("Interpreters() = %d", rt.Interpreters())
	}
	var mainID string
	rt.Main(func(th Thread) error {
		var err error
		mainID, err = th.Eval("id(__import__('sys').modules)")
		return err
	})

	who := loadT(t, rt, "whoami")
	peaks := map[string]int{} // interpreter -> the most requests it ran at once
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				interp, peak, _ := strings.Cut(bodyOf(t, who), " ")
				n, _ := strconv.Atoi(peak)
				mu.Lock()
				peaks[interp] = max(peaks[interp], n)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(peaks) != 2 || peaks[mainID] != 0 {
		t.Fatalf("requests ran in %v; want two subinterpreters, not the main one (%s)", peaks, mainID)
	}
	for interp, n := range peaks {
		t.Logf("interpreter %s ran at most %d requests at once", interp, n)
		if n > 2 {
			t.Errorf("interpreter %s ran %d requests at once, more than its 2", interp, n)
		}
	}

	// One OS thread runs the main interpreter and a subinterpreter in
	// turn; sqlite3's callbacks (PyGILState_Ensure) find the interpreter
	// the thread runs at the time.
	fn := loadT(t, rt, "sqlite_function")
	runtime.LockOSThread()
	for i := range 50 {
		main := Here()
		err := main.Exec(`import sqlite3
_db = sqlite3.connect(":memory:")
_db.create_function("thrice", 1, lambda x: 3 * x)
assert _db.execute("SELECT thrice(14)").fetchone() == (42,)
_db.close()`)
		main.Release()
		if err != nil {
			t.Fatalf("round %d, the main interpreter: %v", i, err)
		}
		interp, n, _ := strings.Cut(bodyOf(t, fn), " ")
		if interp == mainID || n != "42" {
			t.Fatalf("round %d, a subinterpreter on the same thread: %s %s", i, interp, n)
		}
	}
	runtime.UnlockOSThread()

	if got := bodyOf(t, loadT(t, rt, "publishes")); got != "None" {
		t.Errorf("_m0.publish in a subinterpreter without a hub: %q, want None", got)
	}

	stream := loadT(t, rt, "stream")
	th, res, err := stream.Call(request("GET", "/"), nil, true)
	if err != nil || !res.Stream {
		t.Fatalf("stream: %+v, %v", res, err)
	}
	body := string(th.Body())
	for err == nil && res.Stream {
		res, err = th.Next()
		body += string(th.Body())
	}
	th.Release()
	if err != nil || body != "chunk0;chunk1;chunk2;" {
		t.Fatalf("streamed %q, %v", body, err)
	}

	// An interrupt from another goroutine reaches the generator, through
	// the subinterpreter's own control thread.
	th, res, err = stream.Call(request("GET", "/"), nil, true)
	if err != nil || !res.Stream {
		t.Fatalf("stream: %+v, %v", res, err)
	}
	if !th.Interrupt() {
		t.Fatal("Interrupt found no thread state in the subinterpreter")
	}
	if _, err := th.Next(); err == nil || !strings.Contains(err.Error(), "GeneratorExit") {
		t.Errorf("Next after an interrupt: %v, want GeneratorExit", err)
	}
	th.Release()

	app, err := rt.Load("single_phase:app", "", "")
	if err != nil {
		t.Fatalf("the main interpreter imports a single-phase module: %v", err)
	}
	_, err = rt.NewWSGI(app, true, false)
	var ext *ExtensionError
	if !errors.As(err, &ext) || ext.Module != "_testsinglephase" {
		t.Fatalf("NewWSGI of an application importing _testsinglephase: %v, want an ExtensionError naming it", err)
	}
}

// TestInterpretersNoLeaks calls applications 40k times through two
// subinterpreters and checks, in each, that the reference counts of
// long-lived objects and the interpreter's allocated blocks are where
// they started.
func TestInterpretersNoLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("40k calls")
	}
	rt := withInterpreters(t, 2, 1)
	if rt == nil {
		return
	}
	apps := []*WSGI{loadT(t, rt, "hello"), loadT(t, rt, "echo_environ"), loadT(t, rt, "stream"), loadT(t, rt, "raises")}
	run := func(n int) {
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					for _, w := range apps {
						th, res, err := w.Call(request("POST", "/x", "X-Test", "v"), []byte("payload"), true)
						for err == nil && res.Stream {
							res, err = th.Next()
						}
						th.Release()
					}
				}
			}()
		}
		wg.Wait()
	}
	const measure = `(gc.collect(), sys.getallocatedblocks() - _blocks, _refs == (sys.getrefcount(apps.hello), sys.getrefcount(sys.intern("REQUEST_METHOD")), sys.getrefcount(apps.Body)))[1:]`
	run(500) // warm caches
	if err := rt.EachInterpreter(func(th Thread) error {
		return th.Exec(`import gc, sys, apps
gc.collect()
_refs = (sys.getrefcount(apps.hello), sys.getrefcount(sys.intern("REQUEST_METHOD")), sys.getrefcount(apps.Body))
_blocks = sys.getallocatedblocks()`)
	}); err != nil {
		t.Fatal(err)
	}
	run(5000) // 2 goroutines, 4 applications: 40k calls
	var mu sync.Mutex
	err := rt.EachInterpreter(func(th Thread) error {
		got, err := th.Eval(measure)
		if err != nil {
			return err
		}
		grew, same, _ := strings.Cut(strings.Trim(got, "()"), ", ")
		n, _ := strconv.Atoi(grew)
		mu.Lock()
		defer mu.Unlock()
		t.Logf("interpreter %d: %+d blocks after the calls", th.c.interp, n)
		if n > 2000 || same != "True" {
			return fmt.Errorf("interpreter %d: %+d blocks, reference counts kept: %s", th.c.interp, n, same)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInterpretersOwnGIL reads each subinterpreter's configuration from
// inside it (CPython 3.13's _interpreters.get_config):
// its own GIL, its own allocator, and extension modules checked.
func TestInterpretersOwnGIL(t *testing.T) {
	rt := withInterpreters(t, 2, 1)
	if rt == nil {
		return
	}
	var mu sync.Mutex
	var got []string
	err := rt.EachInterpreter(func(th Thread) error {
		c, err := th.Eval(`(lambda I: (lambda c: (c.gil, c.use_main_obmalloc, c.check_multi_interp_extensions, c.allow_daemon_threads))(I.get_config(I.get_current()[0])) if hasattr(I, "get_config") else "no reader")(__import__("_interpreters") if __import__("sys").version_info >= (3, 13) else None)`)
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		if c == "no reader" {
			t.Skip("this CPython cannot read an interpreter's configuration")
		}
		if c != "('own', False, True, True)" {
			t.Errorf("a subinterpreter's configuration: %s, want its own GIL and allocator, modules checked, daemon threads allowed", c)
		}
	}
	if len(got) != 2 {
		t.Errorf("%d interpreters answered", len(got))
	}
}

// TestCombine checks the one rule by which a lifespan phase run in several
// interpreters has one outcome: the first failure, else the last outcome
// of an interpreter where the application supports the lifespan, else the
// last unsupported one.
func TestCombine(t *testing.T) {
	o := func(code int, msg string) Outcome { return Outcome{Code: code, Msg: msg} }
	for _, c := range []struct {
		outs []Outcome
		want Outcome
	}{
		{[]Outcome{o(LifespanStarted, "")}, o(LifespanStarted, "")},
		{[]Outcome{o(LifespanStarted, ""), o(LifespanStarted, "")}, o(LifespanStarted, "")},
		{[]Outcome{o(LifespanUnsupported, "a"), o(LifespanUnsupported, "b")}, o(LifespanUnsupported, "b")},
		{[]Outcome{o(LifespanUnsupported, "a"), o(LifespanStarted, "")}, o(LifespanStarted, "")},
		{[]Outcome{o(LifespanStarted, ""), o(LifespanUnsupported, "b")}, o(LifespanStarted, "")},
		{[]Outcome{o(LifespanStarted, ""), o(LifespanFailed, "no db"), o(LifespanStarted, "")}, o(LifespanFailed, "no db")},
		{[]Outcome{o(LifespanFailed, "first"), o(LifespanFailed, "second")}, o(LifespanFailed, "first")},
		{[]Outcome{o(LifespanStopped, ""), o(LifespanStopFailed, "x"), o(LifespanStopped, "")}, o(LifespanStopFailed, "x")},
	} {
		if got := Combine(c.outs); got != c.want {
			t.Errorf("Combine(%v) = %v, want %v", c.outs, got, c.want)
		}
	}
}
