package sock

import "time"

// epoch is when the process started reading Mono.
var epoch = time.Now()

// Mono is a point in time for bookkeeping done on every request: the
// nanoseconds since epoch, plus one (0 stays free to mean none). It reads
// one clock, the monotonic one, where time.Now reads two.
func Mono() int64 { return int64(time.Since(epoch)) + 1 }

// MonoTime is the time.Time of a Mono reading, with its monotonic reading:
// durations and order from it are the monotonic clock's.
func MonoTime(n int64) time.Time { return epoch.Add(time.Duration(n - 1)) }
