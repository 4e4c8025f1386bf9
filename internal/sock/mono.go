package sock

import (
	"math"
	"time"
)

// epoch is when the process started reading Mono.
var epoch = time.Now()

// Mono is a point in time for bookkeeping done on every request: the
// nanoseconds since epoch, plus one (0 stays free to mean none). It reads
// one clock, the monotonic one, where time.Now reads two.
func Mono() int64 { return int64(time.Since(epoch)) + 1 }

// MonoTime is the time.Time of a Mono reading, with its monotonic reading:
// durations and order from it are the monotonic clock's.
func MonoTime(n int64) time.Time { return epoch.Add(time.Duration(n - 1)) }

// MonoOf is t as a Mono reading, on the monotonic clock where t has a
// reading of it (time.Now().Add(d) does): 0 for the zero time, 1 for any
// time before the process started reading Mono (past, as a deadline),
// and the largest reading for one past what a Duration holds.
func MonoOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	d := t.Sub(epoch) // saturates at the Duration's bounds
	switch {
	case d < 0:
		return 1
	case d == math.MaxInt64:
		return math.MaxInt64
	}
	return int64(d) + 1
}
