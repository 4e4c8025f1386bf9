package host

import (
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
	walkNarrower(t, 0, []narrowCase{
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

// narrowCase is a walk of looks from a start.
type narrowCase struct {
	name   string
	narrow bool // at the start
	looks  []narrowLook
}

// walkNarrower walks each case's looks on a narrower over threads pool
// threads (0: the ASGI loops).
func walkNarrower(t *testing.T, threads int, cases []narrowCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &narrower{threads: threads, narrow: tc.narrow}
			for i, l := range tc.looks {
				if got := d.look(l.cpu, l.python, l.conns); got != l.change || d.narrow != l.narrow {
					t.Errorf("look %d (%.2f of a CPU, %.2f of Python's threads, %d connections): change %v narrow %v, want %v %v",
						i, l.cpu, l.python, l.conns, got, d.narrow, l.change, l.narrow)
				}
			}
		})
	}
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
	measure := func(int64) (time.Duration, time.Duration, int) {
		c, p, k := cpu, python, conns
		measured <- struct{}{}
		return c, p, k
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

// TestNarrowingStopNil: a process m0serve does not narrow stops nothing.
func TestNarrowingStopNil(t *testing.T) {
	var n *narrowing
	n.Stop()
}
