package host

import "testing"

// TestNarrower walks the decision through the loads it is for: a queue of
// connections on a busy process narrows, one connection widens, an idle
// moment changes nothing, and one look alone never changes the count.
func TestNarrower(t *testing.T) {
	type look struct {
		used   float64
		open   int
		change bool
		narrow bool // after the look
	}
	cases := []struct {
		name   string
		narrow bool // at the start
		looks  []look
	}{
		{"a queue keeps it narrow", true, []look{
			{1.0, 64, false, true}, {1.3, 64, false, true}, {0.9, 3, false, true},
		}},
		{"one connection widens after two looks", true, []look{
			{0.95, 1, false, true}, {0.95, 1, true, false}, {0.95, 1, false, false},
		}},
		{"idle changes nothing, wide or narrow", false, []look{
			{0.0, 0, false, false}, {0.01, 64, false, false}, {0.0, 0, false, false},
		}},
		{"idle between two looks starts the count again", true, []look{
			{0.9, 1, false, true}, {0.0, 0, false, true}, {0.9, 1, false, true}, {0.9, 1, true, false},
		}},
		{"a queue on a busy process narrows after two looks", false, []look{
			{0.9, 64, false, false}, {1.2, 64, true, true}, {1.2, 64, false, true},
		}},
		{"a queue on threads that wait with the GIL released widens", true, []look{
			{0.6, 64, false, true}, {0.6, 64, true, false},
		}},
		{"connections up to the threads are not a queue", true, []look{
			{1.0, 2, false, true}, {1.0, 2, true, false},
		}},
		{"a look the other way starts the count again", false, []look{
			{1.0, 64, false, false}, {1.0, 1, false, false}, {1.0, 64, false, false}, {1.0, 64, true, true},
		}},
	}
	for _, tc := range cases {
		d := &narrower{threads: 2, narrow: tc.narrow}
		for i, l := range tc.looks {
			if got := d.look(l.used, l.open); got != l.change || d.narrow != l.narrow {
				t.Errorf("%s: look %d (%.2f of a CPU, %d open): change %v narrow %v, want %v %v",
					tc.name, i, l.used, l.open, got, d.narrow, l.change, l.narrow)
			}
		}
	}
}

// TestNarrowingStopNil: a process m0serve does not narrow stops nothing.
func TestNarrowingStopNil(t *testing.T) {
	var n *narrowing
	n.Stop()
}
