package proc

import "testing"

// TestCPUStat reads each CPU line's total and idle (idle and I/O wait)
// ticks, leaves out other lines and a line with a column that is not a
// number.
func TestCPUStat(t *testing.T) {
	m := CPUStat([]byte(`cpu  900 0 300 9000 100 0 20 0 0 0
cpu0 400 0 100 3000 40 0 10 0 0 0
cpu1 300 0 100 3500 50 0 5 0
cpu2 1 2 3 x 5 6 7 8
intr 123456 0 0
ctxt 98765 1 2 3 4 5 6 7
`))
	want := map[string]CPUTimes{
		"cpu":  {Total: 900 + 300 + 9000 + 100 + 20, Idle: 9100},
		"cpu0": {Total: 400 + 100 + 3000 + 40 + 10, Idle: 3040},
		"cpu1": {Total: 300 + 100 + 3500 + 50 + 5, Idle: 3550},
	}
	if len(m) != len(want) {
		t.Fatalf("%v, want %v", m, want)
	}
	for k, w := range want {
		if m[k] != w {
			t.Errorf("%s: %+v, want %+v", k, m[k], w)
		}
	}
}
