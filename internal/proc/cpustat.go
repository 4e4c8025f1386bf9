package proc

import (
	"bytes"
	"strconv"
)

// UserHZ is the unit of /proc's CPU times (USER_HZ, sysconf(_SC_CLK_TCK)):
// the same on every Linux ABI.
const UserHZ = 100

// CPUTimes are a CPU's times in /proc/stat, in UserHZ ticks: all of them,
// and those idle or waiting for I/O.
type CPUTimes struct{ Total, Idle int64 }

// CPUStat reads /proc/stat's text: each CPU line's times by its name
// ("cpu3"; "cpu" is the sum of all). A line with fewer than seven times,
// or with one that is not a number, is left out.
func CPUStat(stat []byte) map[string]CPUTimes {
	m := map[string]CPUTimes{}
	for line := range bytes.Lines(stat) {
		// cpuN user nice system idle iowait irq softirq steal ...
		f := bytes.Fields(line)
		if len(f) < 8 || !bytes.HasPrefix(f[0], []byte("cpu")) {
			continue
		}
		var t CPUTimes
		ok := true
		for i, v := range f[1:] {
			x, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				ok = false
				break
			}
			t.Total += x
			if i == 3 || i == 4 {
				t.Idle += x
			}
		}
		if ok {
			m[string(f[0])] = t
		}
	}
	return m
}
