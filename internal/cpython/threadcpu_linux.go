package cpython

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadClock is the CPU-time clock of the calling OS thread, readable from
// any thread of the process (the kernel's MAKE_THREAD_CPUCLOCK of its id,
// CPUCLOCK_SCHED, as pthread_getcpuclockid makes it).
func threadClock() (int32, bool) {
	return int32(^uint32(unix.Gettid())<<3 | 6), true
}

// clockTime reads the CPU time of the clock, 0 when it cannot (the thread
// has ended).
func clockTime(clock int32) time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(clock, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
