package host

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestNarrower walks the decision through the loads it is for: a queue of
// connections for Python on a busy process narrows, one connection, a
// quiet process or threads that wait with the GIL released widen, an idle
// moment changes nothing, and one look alone never changes the count.
func TestNarrower(t *testing.T) {
	walkNarrower(t, 2, []narrowCase{
		{"a queue keeps it narrow", true, []narrowLook{
			{1.0, 0.9, 64, false, true, 0}, {0.7, 0.3, 64, false, true, 0}, {0.9, 0.9, 3, false, true, 0},
		}},
		{"a queue on a busy process narrows after two looks", false, []narrowLook{
			{0.9, 0.8, 64, false, false, 0}, {1.2, 1.9, 64, true, true, 0}, {1.2, 1.9, 64, false, true, 0},
		}},
		{"one connection widens after two looks", true, []narrowLook{
			{0.95, 0.5, 1, false, true, 0}, {0.95, 0.5, 1, true, false, 0}, {0.95, 0.5, 1, false, false, 0},
		}},
		{"connections up to the threads are not a queue", true, []narrowLook{
			{1.0, 1.0, 2, false, true, 0}, {1.0, 1.0, 2, true, false, 0}, {1.0, 1.0, 2, false, false, 0},
		}},
		{"a quiet process widens", true, []narrowLook{
			{0.5, 4.0, 64, false, true, 0}, {0.5, 4.0, 64, true, false, 0},
		}},
		{"threads waiting with the GIL released do not narrow", false, []narrowLook{
			{0.7, 8.0, 64, false, false, 0}, {0.7, 8.0, 64, false, false, 0},
		}},
		{"Go's own work does not narrow, and widens", false, []narrowLook{
			{1.5, 0.0, 64, false, false, 0}, {1.5, 0.0, 64, false, false, 0},
		}},
		{"Go's own work widens a narrow process", true, []narrowLook{
			{1.0, 0.1, 64, false, true, 0}, {1.0, 0.1, 64, true, false, 0},
		}},
		{"between the thresholds nothing changes", false, []narrowLook{
			{0.7, 0.9, 64, false, false, 0}, {0.7, 0.9, 64, false, false, 0},
		}},
		{"idle changes nothing, narrow", true, []narrowLook{
			{0.0, 0.0, 0, false, true, 0}, {0.01, 0.0, 1, false, true, 0}, {0.0, 0.0, 0, false, true, 0},
		}},
		{"idle changes nothing, wide", false, []narrowLook{
			{0.0, 0.0, 0, false, false, 0}, {0.01, 0.0, 64, false, false, 0},
		}},
		{"an idle look between two starts the count again", true, []narrowLook{
			{0.9, 0.5, 1, false, true, 0}, {0.0, 0.0, 0, false, true, 0}, {0.9, 0.5, 1, false, true, 0}, {0.9, 0.5, 1, true, false, 0},
		}},
		{"a look the other way starts the count again", false, []narrowLook{
			{1.0, 1.0, 64, false, false, 0}, {1.0, 1.0, 1, false, false, 0}, {1.0, 1.0, 64, false, false, 0}, {1.0, 1.0, 64, true, true, 0},
		}},
	})
}

// TestNarrowerLoops walks the decision for a process with no pool, whose
// Python is its ASGI event loops: a few connections whose requests reach
// the loop, or a busy loop, keep one P; more connections to a loop that
// is not the pace, a few whose requests Go answers alone (files), or no
// request while the process works, widen.
func TestNarrowerLoops(t *testing.T) {
	walkNarrower(t, 0, []narrowCase{
		{"one client keeps it narrow", true, []narrowLook{
			{0.9, 0.5, 1, false, true, 0}, {0.9, 0.2, 2, false, true, 0}, {0.9, 0.06, fewConns, false, true, 0},
		}},
		{"one client narrows after two looks", false, []narrowLook{
			{0.9, 0.3, 1, false, false, 0}, {0.9, 0.12, 1, true, true, 0},
		}},
		{"one client the loop takes little part in does not narrow", false, []narrowLook{
			{0.9, 0.08, 1, false, false, 0}, {0.9, 0.08, 1, false, false, 0},
		}},
		{"one client Go answers alone widens", true, []narrowLook{
			{0.5, 0.0, 1, false, true, 0}, {0.5, 0.04, 1, true, false, 0},
		}},
		{"a busy loop keeps it narrow under many connections", true, []narrowLook{
			{1.2, 0.7, 64, false, true, 0}, {1.2, 0.45, 1024, false, true, 0},
		}},
		{"a loop busy with no new request keeps it narrow", true, []narrowLook{
			{1.0, 0.9, 0, false, true, 0}, {1.0, 0.9, 0, false, true, 0},
		}},
		{"from the start, a loop not the pace widens under many connections", true, []narrowLook{
			{1.0, 0.36, 64, false, true, 0}, {1.0, 0.36, 64, true, false, 0},
		}},
		{"up to twice the few connections keep it narrow", true, []narrowLook{
			{0.9, 0.2, fewConns + 1, false, true, 0}, {0.9, 0.2, 2 * fewConns, false, true, 0}, {0.9, 0.2, 2*fewConns + 1, false, true, 0},
			{0.9, 0.2, 2*fewConns + 1, true, false, 0},
		}},
		{"more than the few connections do not narrow a loop not the pace", false, []narrowLook{
			{0.9, 0.2, fewConns + 1, false, false, 0}, {0.9, 0.2, fewConns + 1, false, false, 0},
		}},
		{"a busy loop narrows", false, []narrowLook{
			{1.2, 0.7, 64, false, false, 0}, {1.2, 0.6, 64, true, true, 0},
		}},
		{"many connections to a loop that is not the pace widen", true, []narrowLook{
			{1.2, 0.2, 64, false, true, 0}, {1.2, 0.2, 64, true, false, 0}, {1.2, 0.45, 64, false, false, 0},
		}},
		{"no request while the process works widens", true, []narrowLook{
			{0.9, 0.2, 0, false, true, 0}, {0.9, 0.3, 0, true, false, 0}, {0.9, 0.3, 0, false, false, 0},
		}},
		{"idle changes nothing", true, []narrowLook{
			{0.0, 0.0, 0, false, true, 0}, {0.01, 0.0, 64, false, true, 0}, {0.0, 0.0, 0, false, true, 0},
		}},
	})
}

// narrowLook is one look's figures, and what it should decide.
type narrowLook struct {
	cpu, python float64 // shares of a CPU, and of a pool thread held or of the loops' threads busy
	conns       int
	change      bool
	narrow      bool    // after the look (a shedder: shed)
	each        float64 // the loop's thread a request served inline, seconds (a shedder's)
}

// narrowCase is a walk of looks from a start.
type narrowCase struct {
	name   string
	narrow bool // at the start
	looks  []narrowLook
}

// walkNarrower walks each case's looks on a narrower over threads pool
// threads (0: the ASGI loops).
func walkNarrower(t *testing.T, threads int, cases []narrowCase) {
	walkDecider(t, func(on bool) decider { return &narrower{threads: threads, narrow: on} }, cases)
}

// walkDecider walks each case's looks on the decider mk makes, started on
// the case's start (narrow: on).
func walkDecider(t *testing.T, mk func(on bool) decider, cases []narrowCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := mk(tc.narrow)
			for i, l := range tc.looks {
				if got := d.look(l.cpu, l.python, l.conns, l.each); got != l.change || d.on() != l.narrow {
					t.Errorf("look %d (%.2f of a CPU, %.2f of Python's threads, %d connections, %.0f µs a request): change %v on %v, want %v %v",
						i, l.cpu, l.python, l.conns, l.each*1e6, got, d.on(), l.change, l.narrow)
				}
			}
		})
	}
}

// TestShedder walks the inverted loop's shedding (narrow: shed): a busy
// loop under many connections sheds when its requests are heavy enough,
// light ones, one client or a few never do, nor a loop with time to spare; once shed, the loop's Python alone keeps it
// while it is busy loopPaceKept of the time, and a quiet loop, a few
// connections or an idle process end it.
func TestShedder(t *testing.T) {
	const starlette, hello = 40e-6, 20e-6 // the loop's thread a request, seconds
	walkDecider(t, func(on bool) decider { return &shedder{shed: on} }, []narrowCase{
		{"a busy loop under many connections sheds after two looks", false, []narrowLook{
			{1.3, 0.95, 64, false, false, starlette}, {1.3, 0.9, 1024, true, true, starlette},
		}},
		{"light requests never shed, however busy the loop", false, []narrowLook{
			{1.3, 0.98, 64, false, false, hello}, {1.3, 0.98, 64, false, false, hello}, {1.3, 0.98, 16, false, false, hello},
		}},
		{"a look with no request given to the loop does not shed", false, []narrowLook{
			{1.3, 0.98, 64, false, false, 0}, {1.3, 0.98, 64, false, false, 0},
		}},
		{"one client never sheds, however busy the loop", false, []narrowLook{
			{1.0, 0.95, 1, false, false, starlette}, {1.0, 0.95, 1, false, false, starlette}, {1.0, 0.95, fewConns, false, false, starlette},
		}},
		{"a loop with time to spare does not shed", false, []narrowLook{
			{1.0, 0.7, 64, false, false, starlette}, {1.0, 0.7, 64, false, false, starlette},
		}},
		{"the loop's Python alone keeps it shed", true, []narrowLook{
			{1.5, 0.6, 64, false, true, 0}, {1.5, 0.41, 64, false, true, 0},
		}},
		{"a loop with time to spare ends it", true, []narrowLook{
			{1.0, 0.3, 64, false, true, 0}, {1.0, 0.3, 64, true, false, 0},
		}},
		{"a few connections end it", true, []narrowLook{
			{1.0, 0.9, 2, false, true, 0}, {1.0, 0.9, 2, true, false, 0},
		}},
		{"an idle process ends it after two looks", true, []narrowLook{
			{0.0, 0.0, 0, false, true, 0}, {0.01, 0.0, 1, true, false, 0}, {0.0, 0.0, 0, false, false, 0},
		}},
		{"one light client after the load ends it", true, []narrowLook{
			{0.05, 0.01, 1, false, true, 0}, {0.05, 0.01, 1, true, false, 0},
		}},
		{"a look the other way starts the count again", false, []narrowLook{
			{1.0, 0.9, 64, false, false, starlette}, {1.0, 0.5, 64, false, false, starlette},
			{1.0, 0.9, 64, false, false, starlette}, {1.0, 0.9, 64, true, true, starlette},
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
	measure := func(int64) (time.Duration, time.Duration, int, int64) {
		c, p, k := cpu, python, conns
		measured <- struct{}{}
		return c, p, k, 0
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
// the inverted loop: it starts unshed, sheds after two busy looks under
// many connections with Go's side on one P, sheds nothing once the server
// is shutting down, and stops shedding when stopped.
func TestSheddingRun(t *testing.T) {
	ticks := make(chan time.Time)
	var cpu, python time.Duration
	measured := make(chan struct{}, 1)
	var inlined int64
	measure := func(int64) (time.Duration, time.Duration, int, int64) {
		c, p, n := cpu, python, inlined
		measured <- struct{}{}
		return c, p, 64, n
	}
	s := &inlineServer{}
	n := &narrowing{stop: make(chan struct{}), done: make(chan struct{})}
	go n.run(ticks, &shedder{}, measure, shedSet([]*inlineServer{s}))
	stop := sync.OnceFunc(func() { close(n.stop); <-n.done })
	t.Cleanup(stop) // the default P count back, whatever fails
	<-measured
	look := func(each time.Duration) {
		cpu += time.Second
		python += time.Second
		inlined += int64(time.Second / each)
		ticks <- time.Now()
		<-measured
	}
	for range 3 { // a hello world's 20 µs a request: no shed
		look(20 * time.Microsecond)
	}
	if s.shedding() {
		t.Fatal("shedding requests of 20 µs")
	}
	if s.shedding() {
		t.Fatal("shedding at the start")
	}
	for range 3 { // two looks decide; the third's reading comes after the change is set
		look(40 * time.Microsecond)
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

// TestNarrowingStopNil: a process m0serve does not narrow stops nothing.
func TestNarrowingStopNil(t *testing.T) {
	var n *narrowing
	n.Stop()
}
