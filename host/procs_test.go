package host

import (
	"math"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/proc"
	"github.com/m0serve/m0/internal/sock"
)

// TestNarrower walks the decision through the loads it is for: a queue of
// connections for Python on a busy process narrows, one connection, a
// quiet process or threads that wait with the GIL released widen, an idle
// moment changes nothing, and one look alone never changes the count.
func TestNarrower(t *testing.T) {
	walkNarrower(t, 2, []narrowCase[narrowLook]{
		{"a queue keeps it narrow", true, []narrowLook{
			{1.0, 0.9, 64, false, true}, {0.7, 0.3, 64, false, true}, {0.9, 0.9, 3, false, true},
		}},
		{"a queue on a busy process narrows after two looks", false, []narrowLook{
			{0.9, 0.8, 64, false, false}, {1.2, 1.9, 64, true, true}, {1.2, 1.9, 64, false, true},
		}},
		{"one connection widens after two looks", true, []narrowLook{
			{0.95, 0.5, 1, false, true}, {0.95, 0.5, 1, true, false}, {0.95, 0.5, 1, false, false},
		}},
		{"connections up to the threads are not a queue", true, []narrowLook{
			{1.0, 1.0, 2, false, true}, {1.0, 1.0, 2, true, false}, {1.0, 1.0, 2, false, false},
		}},
		{"a quiet process widens", true, []narrowLook{
			{0.5, 4.0, 64, false, true}, {0.5, 4.0, 64, true, false},
		}},
		{"threads waiting with the GIL released do not narrow", false, []narrowLook{
			{0.7, 8.0, 64, false, false}, {0.7, 8.0, 64, false, false},
		}},
		{"Go's own work does not narrow, and widens", false, []narrowLook{
			{1.5, 0.0, 64, false, false}, {1.5, 0.0, 64, false, false},
		}},
		{"Go's own work widens a narrow process", true, []narrowLook{
			{1.0, 0.1, 64, false, true}, {1.0, 0.1, 64, true, false},
		}},
		{"between the thresholds nothing changes", false, []narrowLook{
			{0.7, 0.9, 64, false, false}, {0.7, 0.9, 64, false, false},
		}},
		{"idle changes nothing, narrow", true, []narrowLook{
			{0.0, 0.0, 0, false, true}, {0.01, 0.0, 1, false, true}, {0.0, 0.0, 0, false, true},
		}},
		{"idle changes nothing, wide", false, []narrowLook{
			{0.0, 0.0, 0, false, false}, {0.01, 0.0, 64, false, false},
		}},
		{"an idle look between two starts the count again", true, []narrowLook{
			{0.9, 0.5, 1, false, true}, {0.0, 0.0, 0, false, true}, {0.9, 0.5, 1, false, true}, {0.9, 0.5, 1, true, false},
		}},
		{"a look the other way starts the count again", false, []narrowLook{
			{1.0, 1.0, 64, false, false}, {1.0, 1.0, 1, false, false}, {1.0, 1.0, 64, false, false}, {1.0, 1.0, 64, true, true},
		}},
	})
}

// TestNarrowerLoops walks the decision for a process with no pool, whose
// Python is its ASGI event loops: a few connections whose requests reach
// the loop, or a busy loop, keep one P; more connections to a loop that
// is not the pace, a few whose requests Go answers alone (files), or no
// request while the process works, widen.
func TestNarrowerLoops(t *testing.T) {
	walkNarrower(t, 0, []narrowCase[narrowLook]{
		{"one client keeps it narrow", true, []narrowLook{
			{0.9, 0.5, 1, false, true}, {0.9, 0.2, 2, false, true}, {0.9, 0.06, fewConns, false, true},
		}},
		{"one client narrows after two looks", false, []narrowLook{
			{0.9, 0.3, 1, false, false}, {0.9, 0.12, 1, true, true},
		}},
		{"one client the loop takes little part in does not narrow", false, []narrowLook{
			{0.9, 0.08, 1, false, false}, {0.9, 0.08, 1, false, false},
		}},
		{"one client Go answers alone widens", true, []narrowLook{
			{0.5, 0.0, 1, false, true}, {0.5, 0.04, 1, true, false},
		}},
		{"a busy loop keeps it narrow under many connections", true, []narrowLook{
			{1.2, 0.7, 64, false, true}, {1.2, 0.45, 1024, false, true},
		}},
		{"a loop busy with no new request keeps it narrow", true, []narrowLook{
			{1.0, 0.9, 0, false, true}, {1.0, 0.9, 0, false, true},
		}},
		{"from the start, a loop not the pace widens under many connections", true, []narrowLook{
			{1.0, 0.36, 64, false, true}, {1.0, 0.36, 64, true, false},
		}},
		{"up to twice the few connections keep it narrow", true, []narrowLook{
			{0.9, 0.2, fewConns + 1, false, true}, {0.9, 0.2, 2 * fewConns, false, true}, {0.9, 0.2, 2*fewConns + 1, false, true},
			{0.9, 0.2, 2*fewConns + 1, true, false},
		}},
		{"more than the few connections do not narrow a loop not the pace", false, []narrowLook{
			{0.9, 0.2, fewConns + 1, false, false}, {0.9, 0.2, fewConns + 1, false, false},
		}},
		{"a busy loop narrows", false, []narrowLook{
			{1.2, 0.7, 64, false, false}, {1.2, 0.6, 64, true, true},
		}},
		{"many connections to a loop that is not the pace widen", true, []narrowLook{
			{1.2, 0.2, 64, false, true}, {1.2, 0.2, 64, true, false}, {1.2, 0.45, 64, false, false},
		}},
		{"no request while the process works widens", true, []narrowLook{
			{0.9, 0.2, 0, false, true}, {0.9, 0.3, 0, true, false}, {0.9, 0.3, 0, false, false},
		}},
		{"idle changes nothing", true, []narrowLook{
			{0.0, 0.0, 0, false, true}, {0.01, 0.0, 64, false, true}, {0.0, 0.0, 0, false, true},
		}},
	})
}

// narrowLook is one look's figures, and what it should decide.
type narrowLook struct {
	cpu, python float64 // shares of a CPU, and of a pool thread held or of the loops' threads busy
	conns       int
	change      bool
	narrow      bool // after the look
}

func (l narrowLook) figures() figures {
	return figures{cpu: l.cpu, python: l.python, conns: l.conns}
}

func (l narrowLook) decided() (change, on bool) { return l.change, l.narrow }

// shedLook is a shedder's look: its figures with the inline front end's,
// and what it should decide.
type shedLook struct {
	cpu, python   float64
	conns         int
	network, free float64 // CPUs: the inline network calls', and idle
	change        bool
	shed          bool // after the look
}

func (l shedLook) figures() figures {
	return figures{cpu: l.cpu, python: l.python, conns: l.conns, network: l.network, free: l.free}
}

func (l shedLook) decided() (change, on bool) { return l.change, l.shed }

// decidedLook is a look of a case: its figures, and what it decides.
type decidedLook interface {
	figures() figures
	decided() (change, on bool)
}

// narrowCase is a walk of looks from a start.
type narrowCase[L decidedLook] struct {
	name   string
	narrow bool // at the start
	looks  []L
}

// walkNarrower walks each case's looks on a narrower over threads pool
// threads (0: the ASGI loops).
func walkNarrower(t *testing.T, threads int, cases []narrowCase[narrowLook]) {
	walkDecider(t, func(on bool) decider { return &narrower{threads: threads, narrow: on} }, cases)
}

// walkDecider walks each case's looks on the decider mk makes, started on
// the case's start (narrow: on).
func walkDecider[L decidedLook](t *testing.T, mk func(on bool) decider, cases []narrowCase[L]) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := mk(tc.narrow)
			for i, l := range tc.looks {
				change, on := l.decided()
				if got := d.look(l.figures()); got != change || d.on() != on {
					t.Errorf("look %d (%+v): change %v on %v, want %v %v", i, l.figures(), got, d.on(), change, on)
				}
			}
		})
	}
}

// TestShedder walks the inverted loop's shedding (narrow: shed): a busy
// loop under many connections sheds when the CPUs idle beside it can take
// Go's side of its network's work, shedCost times what its network calls
// take on its thread; a light application's network, one client or a
// few, or a loop with time to spare never do. Once shed, the loop's
// Python alone keeps it while it is busy loopPaceKept of the time, and a
// quiet loop, a few connections or an idle process end it.
func TestShedder(t *testing.T) {
	// Measured on two cores beside wrk: Starlette's JSON view's network
	// takes 0.08 of a CPU on the loop's thread with 0.7 idle beside it;
	// the hello world's 0.13, with 0.5 idle.
	walkDecider(t, func(on bool) decider { return &shedder{shed: on} }, []narrowCase[shedLook]{
		{"a busy loop under many connections sheds after two looks", false, []shedLook{
			{1.0, 0.97, 64, 0.08, 0.7, false, false}, {1.0, 0.9, 1024, 0.08, 0.7, true, true},
		}},
		{"a light application's network never sheds, however busy the loop", false, []shedLook{
			{1.0, 0.98, 64, 0.13, 0.5, false, false}, {1.0, 0.98, 64, 0.13, 0.5, false, false}, {1.0, 0.98, 16, 0.14, 0.6, false, false},
		}},
		{"no CPU idle beside the loop, no shed", false, []shedLook{
			{1.0, 0.98, 64, 0.04, 0.1, false, false}, {1.0, 0.98, 64, 0.04, 0.1, false, false},
		}},
		{"a few connections do not shed", false, []shedLook{
			{1.0, 0.97, fewConns, 0.04, 0.9, false, false}, {1.0, 0.97, fewConns, 0.04, 0.9, false, false},
		}},
		{"a loop with time to spare does not shed", false, []shedLook{
			{0.8, 0.7, 64, 0.04, 1.2, false, false}, {0.8, 0.7, 64, 0.04, 1.2, false, false},
		}},
		{"a look the other way starts the count again", false, []shedLook{
			{1.0, 0.9, 64, 0.08, 0.7, false, false}, {1.0, 0.5, 64, 0.08, 0.7, false, false},
			{1.0, 0.9, 64, 0.08, 0.7, false, false}, {1.0, 0.9, 64, 0.08, 0.7, true, true},
		}},
		{"the loop's Python alone keeps a shed, with no CPU idle", true, []shedLook{
			{1.3, 0.7, 64, 0, 0, false, true}, {1.3, 0.45, 64, 0, 0, false, true},
		}},
		{"a quiet loop ends a shed", true, []shedLook{
			{1.0, 0.3, 64, 0, 0.5, false, true}, {1.0, 0.3, 64, 0, 0.5, true, false},
		}},
		{"a few connections end a shed", true, []shedLook{
			{1.0, 0.9, fewConns, 0, 0.5, false, true}, {1.0, 0.9, 2, 0, 0.5, true, false},
		}},
		{"no idle CPU to speak of, no shed, whatever the network", false, []shedLook{
			{1.0, 0.98, 64, 0, 0.05, false, false}, {1.0, 0.98, 64, 0, 0.05, false, false},
		}},
		{"Go's side takes one P under a shed: a CPU is the most it counts", false, []shedLook{
			{1.0, 0.98, 64, 0.2, 3, false, false}, {1.0, 0.98, 64, 0.2, 3, false, false},
			{1.0, 0.98, 64, 0.15, 3, false, false}, {1.0, 0.98, 64, 0.15, 3, true, true},
		}},
		{"an idle process ends a shed", true, []shedLook{
			{0.0, 0.0, 0, 0, 2, false, true}, {0.01, 0.0, 0, 0, 2, true, false},
		}},
	})
}

// TestNarrowingRun drives run with its ticks and figures given: it starts
// narrow, takes each look's figures over the time since the one before,
// sets the count only when the decision changes, and puts the default
// back when stopped.
func TestNarrowingRun(t *testing.T) {
	ticks := make(chan time.Time)
	var cpu, python time.Duration
	conns := 0
	measured := make(chan struct{}, 1)
	measure := func(int64) reading {
		r := reading{cpu: cpu, python: python, conns: conns}
		measured <- struct{}{}
		return r
	}
	var sets []bool
	n := &narrowing{stop: make(chan struct{}), done: make(chan struct{})}
	d := &narrower{threads: 2, narrow: true}
	go n.run(ticks, d, measure, func(narrow bool) { sets = append(sets, narrow) })
	<-measured // the first reading, before any look
	// A busy look: an hour of CPU and of a thread held whatever time the
	// look took, so the shares pass every threshold.
	busyLook := func(c int) {
		cpu += time.Hour
		python += time.Hour
		conns = c
		ticks <- time.Now()
		<-measured
	}
	busyLook(1)
	busyLook(1) // two looks: the default
	busyLook(64)
	busyLook(64) // two looks of a queue: one P
	close(n.stop)
	<-n.done
	want := []bool{true, false, true, false}
	if len(sets) != len(want) {
		t.Fatalf("sets %v, want %v", sets, want)
	}
	for i := range want {
		if sets[i] != want[i] {
			t.Fatalf("sets %v, want %v", sets, want)
		}
	}
}

// TestSheddingRun drives run with a shedder as narrowProcs sets it up for
// the inverted loop on two CPUs: it starts unshed, leaves a light
// application's network on the loop's thread, sheds after two looks of a
// busy loop under many connections with CPU idle beside it, with Go's
// side on one P, sheds nothing once the server is shutting down, and
// stops shedding when stopped.
func TestSheddingRun(t *testing.T) {
	ticks := make(chan time.Time)
	measured := make(chan struct{}, 1)
	// The process runs at rate's figures from one reading to the next: each
	// reading adds them up over the time since the one before, as the
	// process's clocks would. The test sets rate before the tick that
	// measures it.
	var rate figures
	var sum reading
	last := sock.Mono()
	measure := func(int64) reading {
		now := sock.Mono()
		d := float64(now - last)
		last = now
		sum.cpu += time.Duration(rate.cpu * d)
		sum.python += time.Duration(rate.python * d)
		sum.network += time.Duration(rate.network * d)
		sum.idle += time.Duration(rate.free * d)
		sum.conns = rate.conns
		measured <- struct{}{}
		return sum
	}
	s := &inlineServer{}
	n := &narrowing{stop: make(chan struct{}), done: make(chan struct{}), usable: 2, shares: 1}
	go n.run(ticks, &shedder{}, measure, shedSet([]*inlineServer{s}))
	stop := sync.OnceFunc(func() { close(n.stop); <-n.done })
	t.Cleanup(stop) // the default P count back, whatever fails
	<-measured
	look := func(f figures) {
		rate = f
		time.Sleep(10 * time.Millisecond) // a span long beside the reading's own time
		ticks <- time.Now()
		<-measured
	}
	if s.shedding() {
		t.Fatal("shedding at the start")
	}
	for range 3 { // the hello world's network, measured: no shed
		look(figures{cpu: 1.0, python: 0.98, conns: 64, network: 0.13, free: 0.5})
	}
	if s.shedding() {
		t.Fatal("shedding a light application's network")
	}
	for range 3 { // two looks decide; the third's reading comes after the change is set
		look(figures{cpu: 1.0, python: 0.97, conns: 64, network: 0.08, free: 0.7})
	}
	if !s.shedding() {
		t.Fatal("not shedding after two busy looks under 64 connections")
	}
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("GOMAXPROCS %d while shedding, want 1", runtime.GOMAXPROCS(0))
	}
	s.ending.Store(true)
	if s.shedding() {
		t.Error("shedding while the server shuts down")
	}
	s.ending.Store(false)
	stop()
	if s.shedding() {
		t.Error("shedding after the looks stopped")
	}
}

// TestIdleClock: the idle time of the CPUs the process may use is their
// idle and I/O-wait columns in /proc/stat, the others' left out; and on
// Linux it is read from the live file.
func TestIdleClock(t *testing.T) {
	stat := []byte(`cpu  900 0 300 9000 100 0 20 0 0 0
cpu0 400 0 100 3000 40 0 10 0 0 0
cpu1 300 0 100 3500 50 0 5 0 0 0
cpu2 200 0 100 2500 10 0 5 0 0 0
intr 123456 0 0
ctxt 98765
`)
	c := &idleClock{cpus: map[string]bool{"cpu0": true, "cpu2": true}}
	if got, want := c.sum(stat), (3000+40+2500+10)*10*time.Millisecond; got != want {
		t.Errorf("cpu0 and cpu2 idle %v, want %v", got, want)
	}
	if got := (&idleClock{cpus: map[string]bool{"cpu7": true}}).sum(stat); got != -1 {
		t.Errorf("a CPU not in the text: %v, want -1", got)
	}
	if got := c.sum([]byte("cpu0 1 2 3 x 5 6\n")); got != -1 {
		t.Errorf("a column that is not a number: %v, want -1", got)
	}
	var none *idleClock
	if got := none.read(); got != -1 {
		t.Errorf("nil read %v, want -1", got)
	}
	if runtime.GOOS != "linux" {
		return
	}
	// Live: where /proc/stat names a CPU this process may use, their idle
	// time is read, and is more than none (a machine has been idle some
	// time since it booted).
	live := newIdleClock()
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for name := range proc.CPUStat(stat) {
		named = named || live.cpus[name]
	}
	if !named {
		t.Skip("no /proc/stat line names this process's CPUs (a container that renumbers them)")
	}
	if got := live.read(); got <= 0 {
		t.Errorf("the idle time of this process's CPUs read %v", got)
	}
}

// TestFree: a look's idle CPUs are those idle in the span, no more than
// the process may use less what it used, or that alone when the idle
// time is unknown; never below none, and shared among the workers.
func TestFree(t *testing.T) {
	span := float64(100 * time.Millisecond)
	for _, c := range []struct {
		usable, cpu float64
		shares      int
		idled       time.Duration
		known       bool
		want        float64
	}{
		{2, 1.0, 1, 70 * time.Millisecond, true, 0.7},  // two cores, wrk beside: the idle time
		{64, 1.0, 1, 6 * time.Second, true, 60},        // a large host, all of it free
		{1.5, 1.0, 1, 6 * time.Second, true, 0.5},      // a CPU limit of 1.5: what it leaves
		{2, 1.3, 1, 0, false, 0.7},                     // no /proc/stat: the limit less what it used
		{2, 2.2, 1, 0, true, 0},                        // never below none
		{8, 1.0, 4, 400 * time.Millisecond, true, 1.0}, // four workers share four idle CPUs
	} {
		n := &narrowing{usable: c.usable, shares: c.shares}
		if got := n.free(c.cpu, c.idled, span, c.known); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%+v: free %.3f, want %.3f", c, got, c.want)
		}
	}
}

// TestNarrowingStopNil: a process m0serve does not narrow stops nothing.
func TestNarrowingStopNil(t *testing.T) {
	var n *narrowing
	n.Stop()
}
