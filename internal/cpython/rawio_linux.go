package cpython

import (
	"syscall"
	"time"
	"unsafe"
)

// readWakeups is false: the loop's wake-ups of the collector come on an
// eventfd, whose count can go unread (it saturates only after 2^64-2
// writes): Go's edge-triggered poller reports each write all the same.
const readWakeups = false

// rawWrite and rawRead are write and read as raw system calls, which do not
// tell Go's scheduler (entersyscall): for a descriptor that never blocks (an
// eventfd or a pipe, non-blocking), so that the runtime's monitor is not
// woken by them (docs/profiles.md, "The runtime's monitor on one CPU").
func rawWrite(fd int, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawRead(fd int, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// threadClock is the CPU-time clock of the calling OS thread, readable from
// any thread of the process (the kernel's MAKE_THREAD_CPUCLOCK of its id,
// CPUCLOCK_SCHED).
func threadClock() (int32, bool) {
	tid, _, _ := syscall.RawSyscall(syscall.SYS_GETTID, 0, 0, 0)
	return int32(^uint32(tid)<<3 | 6), true
}

// clockTime reads the CPU time of the clock, 0 when it cannot (the thread
// has ended).
func clockTime(clock int32) time.Duration {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
