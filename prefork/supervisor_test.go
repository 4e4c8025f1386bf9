package prefork

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/m0serve/m0/internal/testutil"
)

// fakeProc is a worker process the test drives: it reports what the test
// says, and records the signals and the go it is sent.
type fakeProc struct {
	pid    int
	slot   int
	opts   SpawnOptions
	at     time.Time
	report func(Event)

	mu     sync.Mutex
	sigs   []syscall.Signal
	goes   int
	exited bool
	// onTerm, if set, exits the process when it is sent SIGTERM.
	onTerm bool
}

func (p *fakeProc) Pid() int { return p.pid }

func (p *fakeProc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	p.sigs = append(p.sigs, sig)
	exit := (p.onTerm && sig == syscall.SIGTERM || sig == syscall.SIGKILL) && !p.exited
	p.mu.Unlock()
	if exit {
		p.exit("signal: " + sig.String())
	}
	return nil
}

func (p *fakeProc) setOnTerm(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onTerm = v
}

func (p *fakeProc) gos() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.goes
}

func (p *fakeProc) Go() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.goes++
	return nil
}

func (p *fakeProc) exit(status string) {
	p.mu.Lock()
	if p.exited {
		p.mu.Unlock()
		return
	}
	p.exited = true
	p.mu.Unlock()
	go p.report(Event{Kind: Exited, Status: status})
}

func (p *fakeProc) signals() []syscall.Signal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]syscall.Signal(nil), p.sigs...)
}

// rig runs a supervisor of fake processes.
type rig struct {
	t      *testing.T
	spawns chan *fakeProc
	stop   chan os.Signal
	reload chan string
	repl   chan Replacement
	ready  chan struct{} // Supervisor.Ready
	out    *testutil.LockedBuffer
	code   chan int
	pid    int
	onTerm bool
}

func newRig(t *testing.T, workers int, onTerm bool, with ...func(*Supervisor)) *rig {
	r := &rig{t: t, spawns: make(chan *fakeProc, 64), stop: make(chan os.Signal, 1), reload: make(chan string, 1),
		repl: make(chan Replacement, 4), ready: make(chan struct{}, 8),
		out: &testutil.LockedBuffer{}, code: make(chan int, 1), pid: 100, onTerm: onTerm}
	var mu sync.Mutex
	s := &Supervisor{
		Workers: workers,
		Stderr:  r.out,
		Reload:  r.reload,
		Replace: r.repl,
		Ready:   func() { r.ready <- struct{}{} },
		Spawn: func(slot int, opts SpawnOptions, report func(Event)) (Proc, error) {
			mu.Lock()
			r.pid++
			p := &fakeProc{pid: r.pid, slot: slot, opts: opts, at: time.Now(), report: report, onTerm: r.onTerm}
			mu.Unlock()
			r.spawns <- p
			return p, nil
		},
	}
	for _, f := range with {
		f(s)
	}
	go func() { r.code <- s.Run(r.stop) }()
	return r
}

// spawned waits for the next spawn.
func (r *rig) spawned() *fakeProc {
	r.t.Helper()
	synctest.Wait()
	select {
	case p := <-r.spawns:
		return p
	default:
		r.t.Fatal("no worker was started")
		return nil
	}
}

func (r *rig) none() {
	r.t.Helper()
	synctest.Wait()
	select {
	case p := <-r.spawns:
		r.t.Fatalf("worker %d was started, and none should have been", p.slot)
	default:
	}
}

// started starts n workers and makes them ready.
func (r *rig) started(n int) []*fakeProc {
	var ps []*fakeProc
	for range n {
		p := r.spawned()
		p.report(Event{Kind: Ready})
		ps = append(ps, p)
	}
	return ps
}

func (r *rig) exitCode() int {
	r.t.Helper()
	synctest.Wait()
	select {
	case c := <-r.code:
		return c
	default:
		r.t.Fatal("the supervisor is still running")
		return -1
	}
}

// TestRespawn: a worker that dies after a long life is replaced at once,
// with the same number, as a replacement; the others are left alone.
func TestRespawn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, true)
		ps := r.started(2)
		time.Sleep(time.Minute)
		ps[1].exit("signal: killed")
		p := r.spawned()
		if p.slot != 1 || !p.opts.Replaced || time.Since(p.at) != 0 || p.at.Sub(ps[1].at) != time.Minute {
			t.Fatalf("replacement: slot %d replaced %v, started %s after the first", p.slot, p.opts.Replaced, p.at.Sub(ps[1].at))
		}
		if !strings.Contains(r.out.String(), "m0serve: worker 1 (pid 102) signal: killed; replacing it\n") {
			t.Fatalf("stderr: %q", r.out.String())
		}
		if len(ps[0].signals()) != 0 {
			t.Fatal("the other worker was signalled")
		}
		r.stop <- syscall.SIGTERM
		if c := r.exitCode(); c != 0 {
			t.Fatalf("exit %d after SIGTERM", c)
		}
	})
}

// TestBackoffAndGiveUp: quick deaths in a row are replaced after 100 ms,
// 200, 400, 800; the fifth gives up with exit 1 and one line, draining
// the other worker.
func TestBackoffAndGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, true)
		ps := r.started(2)
		time.Sleep(time.Minute) // the first death is after a long life
		ps[0].exit("exit status 3")
		p := r.spawned()
		if p.at.Sub(ps[0].at) != time.Minute {
			t.Fatalf("the first replacement waited %s", p.at.Sub(ps[0].at)-time.Minute)
		}
		for _, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond} {
			p.report(Event{Kind: Ready})
			time.Sleep(time.Second) // quick: well within 10 s
			died := time.Now()
			p.exit("exit status 3")
			r.none()
			time.Sleep(want - time.Nanosecond)
			r.none()
			time.Sleep(time.Nanosecond)
			p = r.spawned()
			if p.slot != 0 || p.at.Sub(died) != want {
				t.Fatalf("replaced slot %d after %s, want slot 0 after %s", p.slot, p.at.Sub(died), want)
			}
		}
		p.exit("exit status 3")
		if c := r.exitCode(); c != 1 {
			t.Fatalf("exit %d, want 1", c)
		}
		want := "m0serve: worker 0 died 5 times in a row within 10s of starting (last: exit status 3); giving up\n"
		if strings.Count(r.out.String(), "giving up") != 1 || !strings.Contains(r.out.String(), want) {
			t.Fatalf("stderr: %q", r.out.String())
		}
		if s := ps[1].signals(); len(s) != 1 || s[0] != syscall.SIGTERM {
			t.Fatalf("the other worker got %v, want SIGTERM", s)
		}
	})
}

// TestStartupFailure: a worker that fails before it is ready ends the
// server with its exit code and its message, printed once, however many
// fail; the others are stopped.
func TestStartupFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 3, true)
		ps := []*fakeProc{r.spawned(), r.spawned(), r.spawned()}
		ps[0].report(Event{Kind: Ready})
		ps[1].report(Event{Kind: Failed, Code: 1, Text: "m0serve: cannot load app\nTraceback: boom\n"})
		synctest.Wait()
		ps[1].exit("exit status 1")
		if c := r.exitCode(); c != 1 {
			t.Fatalf("exit %d, want 1", c)
		}
		if got := r.out.String(); got != "m0serve: cannot load app\nTraceback: boom\n" {
			t.Fatalf("stderr: %q", got)
		}
		for _, p := range []*fakeProc{ps[0], ps[2]} {
			if s := p.signals(); len(s) == 0 || s[0] != syscall.SIGTERM {
				t.Fatalf("worker %d got %v, want SIGTERM", p.slot, s)
			}
		}
		r.none()
	})
}

// TestStartupFailureCode: a failure's own exit code (78) is the server's.
func TestStartupFailureCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, true)
		p := r.spawned()
		p.report(Event{Kind: Failed, Code: 78, Text: "m0serve: no libpython\n"})
		synctest.Wait()
		p.exit("exit status 78")
		if c := r.exitCode(); c != 78 {
			t.Fatalf("exit %d, want 78", c)
		}
	})
}

// TestDrainBound: SIGTERM reaches every worker at once; one still running
// after the drain and its grace is named and killed; the supervisor exits
// 0.
func TestDrainBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, false)
		ps := r.started(2)
		start := time.Now()
		r.stop <- syscall.SIGTERM
		synctest.Wait()
		for _, p := range ps {
			if s := p.signals(); len(s) != 1 || s[0] != syscall.SIGTERM {
				t.Fatalf("worker %d got %v", p.slot, s)
			}
		}
		ps[0].exit("exit status 0") // drained in time
		time.Sleep(DefaultDrain + DefaultGrace - time.Nanosecond)
		if s := ps[1].signals(); len(s) != 1 {
			t.Fatalf("killed before the bound: %v", s)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if s := ps[1].signals(); len(s) != 2 || s[1] != syscall.SIGKILL {
			t.Fatalf("worker 1 got %v, want SIGTERM then SIGKILL", s)
		}
		if c := r.exitCode(); c != 0 || time.Since(start) != DefaultDrain+DefaultGrace {
			t.Fatalf("exit %d after %s", c, time.Since(start))
		}
		if want := "m0serve: worker 1 (pid 102) still draining after 5s; killed\n"; !strings.Contains(r.out.String(), want) {
			t.Fatalf("stderr: %q", r.out.String())
		}
		if strings.Contains(r.out.String(), "worker 0") {
			t.Fatalf("the worker that drained in time was named: %q", r.out.String())
		}
	})
}

// TestReload: the new workers load first; once all are prepared the old
// drain, and the new serve when the old are gone.
func TestReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, true)
		old := r.started(2)
		r.reload <- "app.py"
		synctest.Wait()
		next := []*fakeProc{r.spawned(), r.spawned()}
		for _, p := range next {
			if !p.opts.Prepare {
				t.Fatal("a reload's worker was not started prepared")
			}
		}
		next[0].report(Event{Kind: Prepared})
		synctest.Wait()
		if len(old[0].signals()) != 0 {
			t.Fatal("the old workers were stopped before every new one was prepared")
		}
		old[0].setOnTerm(false)
		old[1].setOnTerm(false)
		next[1].report(Event{Kind: Prepared})
		synctest.Wait()
		if s := old[0].signals(); len(s) != 1 || s[0] != syscall.SIGTERM {
			t.Fatalf("old worker 0 got %v", s)
		}
		if next[0].gos() != 0 {
			t.Fatal("a new worker served beside the old")
		}
		old[0].exit("exit status 0")
		synctest.Wait()
		if next[0].gos() != 0 {
			t.Fatal("a new worker served before every old one had gone")
		}
		old[1].exit("exit status 0")
		synctest.Wait()
		if next[0].gos() != 1 || next[1].gos() != 1 {
			t.Fatalf("go sent %d and %d times", next[0].gos(), next[1].gos())
		}
		r.none() // the old workers' exits are not replaced
		if !strings.Contains(r.out.String(), "m0serve: app.py changed; reloading\n") {
			t.Fatalf("stderr: %q", r.out.String())
		}
		r.stop <- syscall.SIGTERM
		for _, p := range next {
			p.exit("exit status 0")
		}
		if c := r.exitCode(); c != 0 {
			t.Fatalf("exit %d", c)
		}
	})
}

// TestReloadBroken: a change that does not load prints why and leaves the
// old workers serving; the next change is tried.
func TestReloadBroken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, true)
		old := r.started(2)
		r.reload <- "app.py"
		next := []*fakeProc{r.spawned(), r.spawned()}
		next[0].report(Event{Kind: Prepared})
		next[1].report(Event{Kind: Failed, Code: 1, Text: "Traceback: SyntaxError\n"})
		synctest.Wait()
		next[1].exit("exit status 1")
		synctest.Wait()
		if s := next[0].signals(); len(s) == 0 || s[0] != syscall.SIGTERM {
			t.Fatalf("the prepared new worker got %v, want SIGTERM", s)
		}
		for _, p := range old {
			if len(p.signals()) != 0 {
				t.Fatal("an old worker was stopped by a change that did not load")
			}
		}
		out := r.out.String()
		if strings.Count(out, "Traceback: SyntaxError") != 1 || !strings.Contains(out, "the change did not load; the previous workers serve on") {
			t.Fatalf("stderr: %q", out)
		}
		r.none()
		r.reload <- "app.py"
		synctest.Wait()
		if p := r.spawned(); !p.opts.Prepare {
			t.Fatal("the next change was not tried")
		}
		r.stop <- syscall.SIGTERM
		if c := r.exitCode(); c != 0 {
			t.Fatalf("exit %d", c)
		}
	})
}

// TestReplace: a replacement loads first; then the old worker drains, and
// the successor serves once it has exited; the other worker is left alone.
func TestReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, false)
		ps := r.started(2)
		r.repl <- Replacement{Slot: 1, Why: "a test"}
		n := r.spawned()
		if n.slot != 1 || !n.opts.Prepare || !n.opts.Replaced {
			t.Fatalf("successor: slot %d, %+v", n.slot, n.opts)
		}
		if len(ps[1].signals()) != 0 {
			t.Fatal("the old worker was told to drain before its successor loaded")
		}
		n.report(Event{Kind: Prepared})
		synctest.Wait()
		if s := ps[1].signals(); len(s) != 1 || s[0] != syscall.SIGTERM || n.gos() != 0 {
			t.Fatalf("once prepared: old got %v, successor %d go", s, n.gos())
		}
		ps[1].exit("exit status 0")
		synctest.Wait()
		if n.gos() != 1 {
			t.Fatalf("the successor was told to serve %d times once the old one exited", n.gos())
		}
		n.report(Event{Kind: Ready})
		r.none() // the old one's exit is not a death to replace
		if len(ps[0].signals()) != 0 {
			t.Fatal("the other worker was signalled")
		}
		out := r.out.String()
		if !strings.Contains(out, "m0serve: replacing worker 1 (pid 102): a test\n") ||
			!strings.Contains(out, "m0serve: worker 1 replaced: pid 103 serves in place of pid 102\n") {
			t.Fatalf("stderr: %q", out)
		}
		r.stop <- syscall.SIGTERM
		synctest.Wait()
		if s := n.signals(); len(s) != 1 || s[0] != syscall.SIGTERM {
			t.Fatalf("the successor got %v on the stop", s)
		}
		ps[0].exit("exit status 0")
		n.exit("exit status 0")
		if c := r.exitCode(); c != 0 {
			t.Fatalf("exit %d", c)
		}
	})
}

// TestHold: a replacement asked for while Hold holds waits, in order, and
// starts once Hold lets go; a death is started again meanwhile.
func TestHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan bool, 1)
		r := newRig(t, 2, true, func(s *Supervisor) { s.Hold = hold })
		ps := r.started(2)
		hold <- true
		synctest.Wait()
		r.repl <- Replacement{Slot: 1, Why: "a test"}
		r.none()
		time.Sleep(time.Minute)
		ps[0].exit("exit status 1") // a death: started again, held or not
		if d := r.spawned(); d.slot != 0 {
			t.Fatalf("the dead worker's slot %d", d.slot)
		} else {
			d.report(Event{Kind: Ready})
		}
		r.none()
		hold <- false
		n := r.spawned()
		if n.slot != 1 || !n.opts.Replaced || !n.opts.Prepare {
			t.Fatalf("after the hold: slot %d, %+v", n.slot, n.opts)
		}
		n.report(Event{Kind: Prepared}) // the old one drains and exits (onTerm)
		synctest.Wait()
		n.report(Event{Kind: Ready})
		r.stop <- syscall.SIGTERM
		if c := r.exitCode(); c != 0 {
			t.Fatalf("exit %d after SIGTERM", c)
		}
	})
}

// TestRollingReplace: every worker (SIGHUP's Slot -1), one at a time; a
// successor that cannot load leaves its worker serving, and the next goes
// on.
func TestRollingReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 3, true)
		ps := r.started(3)
		<-r.ready
		r.repl <- Replacement{Slot: -1, Why: "SIGHUP"}
		n0 := r.spawned()
		r.none()                         // one at a time
		n0.report(Event{Kind: Prepared}) // the old one exits on SIGTERM (onTerm)
		synctest.Wait()
		n0.report(Event{Kind: Ready})
		n1 := r.spawned()
		if n0.slot != 0 || n1.slot != 1 || n0.gos() != 1 {
			t.Fatalf("slots %d then %d, go %d", n0.slot, n1.slot, n0.gos())
		}
		n1.report(Event{Kind: Failed, Code: 1, Text: "m0serve: ImportError: no\n"})
		n1.exit("exit status 1")
		n2 := r.spawned()
		if n2.slot != 2 {
			t.Fatalf("after a failed successor: slot %d", n2.slot)
		}
		if len(ps[1].signals()) != 0 {
			t.Fatal("worker 1 was drained though its successor failed")
		}
		n2.report(Event{Kind: Prepared})
		synctest.Wait()
		n2.report(Event{Kind: Ready})
		r.none()
		out := r.out.String()
		if !strings.Contains(out, "ImportError: no") || !strings.Contains(out, "worker 1's replacement did not start; worker 1 (pid 102) serves on") {
			t.Fatalf("stderr: %q", out)
		}
		select {
		case <-r.ready:
			t.Fatal("Ready again after replacements")
		default:
		}
		r.stop <- syscall.SIGTERM
		if c := r.exitCode(); c != 0 {
			t.Fatalf("exit %d", c)
		}
	})
}

// TestDueAndLifetime: a worker's Due, and one that has lived Lifetime, are
// replaced; so is one whose memory passes MaxRSS.
func TestDueAndLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var big sync.Map
		r := newRig(t, 2, true, func(s *Supervisor) {
			s.Lifetime = time.Hour
			s.MaxRSS = 100 << 20
			s.RSS = func(pid int) (int64, error) {
				if _, ok := big.Load(pid); ok {
					return 200 << 20, nil
				}
				return 10 << 20, nil
			}
		})
		ps := r.started(2)
		ps[0].report(Event{Kind: Due, Text: "it has served 5 requests (--max-requests)"})
		n := r.spawned()
		n.report(Event{Kind: Prepared})
		synctest.Wait()
		n.report(Event{Kind: Ready})
		big.Store(ps[1].pid, true)
		time.Sleep(CheckEvery)
		m := r.spawned()
		m.report(Event{Kind: Prepared})
		synctest.Wait()
		m.report(Event{Kind: Ready})
		time.Sleep(time.Hour)
		l := r.spawned()
		out := r.out.String()
		for _, want := range []string{"replacing worker 0 (pid 101): it has served 5 requests (--max-requests)",
			"replacing worker 1 (pid 102): its memory is 200 MiB, over 100 MiB (--workers-max-rss)",
			"(pid 103): it has served for 1h0m0s (--workers-lifetime)"} {
			if !strings.Contains(out, want) {
				t.Errorf("stderr lacks %q: %q", want, out)
			}
		}
		l.report(Event{Kind: Prepared})
		synctest.Wait()
		l.report(Event{Kind: Ready})
		r.stop <- syscall.SIGTERM
		synctest.Wait()
		for _, p := range []*fakeProc{n, m, l} {
			p.exit("exit status 0")
		}
		if c := r.exitCode(); c != 0 {
			t.Fatalf("exit %d", c)
		}
	})
}

// TestScale: SIGTTIN starts a worker in the next slot, up to Slots;
// SIGTTOU drains the last, never the only one; the slots in use are told.
func TestScale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		scale := make(chan int, 8)
		var mu sync.Mutex
		inUse := map[int]bool{0: true, 1: true}
		r := newRig(t, 2, false, func(s *Supervisor) {
			s.Slots, s.Scale = 3, scale
			s.InUse = func(slot int, on bool) { mu.Lock(); inUse[slot] = on; mu.Unlock() }
		})
		ps := r.started(2)
		scale <- 1
		n := r.spawned()
		if n.slot != 2 || n.opts.Prepare {
			t.Fatalf("added: slot %d, %+v", n.slot, n.opts)
		}
		n.report(Event{Kind: Ready})
		scale <- 1 // past Slots
		r.none()
		scale <- -1
		synctest.Wait()
		if s := n.signals(); len(s) != 1 || s[0] != syscall.SIGTERM {
			t.Fatalf("the last worker got %v", s)
		}
		mu.Lock()
		if !inUse[2] {
			t.Error("slot 2 was let go before its worker exited")
		}
		mu.Unlock()
		n.exit("exit status 0")
		r.none() // not respawned
		mu.Lock()
		if inUse[2] {
			t.Error("slot 2 is still in use after its worker left")
		}
		mu.Unlock()
		scale <- -1
		synctest.Wait()
		if s := ps[1].signals(); len(s) != 1 {
			t.Fatalf("worker 1 got %v", s)
		}
		ps[1].exit("exit status 0")
		scale <- -1 // one left
		r.none()
		if len(ps[0].signals()) != 0 {
			t.Fatal("the only worker was drained")
		}
		out := r.out.String()
		for _, want := range []string{
			"m0serve: SIGTTIN: worker 2 (pid 103) added; 3 workers\n",
			"m0serve: SIGTTIN: 3 workers already, the most this supervisor has room for (3 slots); restart with a larger --workers for more\n",
			"m0serve: SIGTTOU: worker 2 (pid 103) drains; 2 workers\n",
			"m0serve: SIGTTOU: worker 1 (pid 102) drains; 1 workers\n",
			"m0serve: SIGTTOU: one worker left, which serves on\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("stderr lacks %q:\n%s", want, out)
			}
		}
		r.stop <- syscall.SIGTERM
		synctest.Wait()
		ps[0].exit("exit status 0")
		if c := r.exitCode(); c != 0 {
			t.Fatalf("exit %d", c)
		}
	})
}

// TestScaleEdges: a SIGTTIN while the last SIGTTOU'd worker still drains
// waits for it (not two workers in one slot); a replacement queued for a
// slot SIGTTOU removed is dropped; a SIGTTIN worker that cannot start is
// not started again and leaves the others serving.
func TestScaleEdges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		scale := make(chan int, 8)
		r := newRig(t, 2, false, func(s *Supervisor) { s.Slots, s.Scale = 4, scale })
		ps := r.started(2)
		scale <- -1
		synctest.Wait()
		if s := ps[1].signals(); len(s) != 1 {
			t.Fatalf("worker 1 got %v", s)
		}
		scale <- 1
		r.none() // slot 1 still drains
		ps[1].exit("exit status 0")
		n := r.spawned()
		if n.slot != 1 {
			t.Fatalf("added in slot %d", n.slot)
		}
		n.report(Event{Kind: Ready})
		// A worker due for replacement, then SIGTTOU of its slot.
		n.report(Event{Kind: Due, Reason: "max-requests", Text: "it has served 10 requests (--max-requests)"})
		synctest.Wait() // the replacement is under way before the SIGTTOU
		scale <- -1
		// The replacement runs first: its successor loads.
		succ := r.spawned()
		succ.report(Event{Kind: Prepared})
		synctest.Wait()
		n.exit("exit status 0")
		synctest.Wait()
		succ.report(Event{Kind: Ready})
		synctest.Wait()
		if s := succ.signals(); len(s) != 1 {
			t.Fatalf("the successor in the removed slot got %v", s)
		}
		succ.exit("exit status 0")
		r.none()
		// SIGTTIN with broken code: the worker dies before it is ready.
		scale <- 1
		bad := r.spawned()
		bad.report(Event{Kind: Failed, Code: 1, Text: "m0serve: cannot load the application\n"})
		bad.exit("exit status 1")
		r.none() // not started again
		if out := r.out.String(); !strings.Contains(out, "m0serve: SIGTTIN: worker 1 (pid "+strconv.Itoa(bad.pid)+") did not start (exit status 1); 1 workers\n") {
			t.Errorf("stderr: %s", out)
		}
		r.stop <- syscall.SIGTERM
		synctest.Wait()
		ps[0].exit("exit status 0")
		if c := r.exitCode(); c != 0 {
			t.Fatalf("exit %d", c)
		}
	})
}

// TestCtrlFraming: control messages arrive whole and in order, and one
// longer than maxCtrl arrives cut to it rather than stopping the reader.
func TestCtrlFraming(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	long := strings.Repeat("x", maxCtrl+10)
	go func() {
		for _, m := range []string{"ready", "", long, "after"} {
			if err := sendCtrl(a, m); err != nil {
				t.Error(err)
			}
		}
	}()
	r := bufio.NewReader(b)
	for _, want := range []string{"ready", "", long[:maxCtrl], "after"} {
		got, err := readCtrl(r)
		if err != nil || got != want {
			t.Fatalf("read %d bytes (%.10q), %v; want %d bytes", len(got), got, err, len(want))
		}
	}
}
