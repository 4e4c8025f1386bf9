package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// AnonFile returns a new empty file in memory, named name, that no path
// leads to: one a process maps, or hands a child, to share what it holds
// (memfd_create; close-on-exec).
func AnonFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, &os.PathError{Op: "memfd_create", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}
