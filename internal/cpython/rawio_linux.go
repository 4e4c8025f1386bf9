package cpython

import (
	"syscall"
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
