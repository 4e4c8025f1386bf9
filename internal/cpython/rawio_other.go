//go:build !linux

package cpython

import "syscall"

// readWakeups is true: the loop's wake-ups come on a pipe, which must be
// read, or its writer would find it full and the wake-ups stop.
const readWakeups = true

// rawWrite and rawRead are plain write and read where raw system calls are
// not Go's to make (macOS makes them through libc).
func rawWrite(fd int, b []byte) (int, error) { return syscall.Write(fd, b) }

func rawRead(fd int, b []byte) (int, error) { return syscall.Read(fd, b) }
