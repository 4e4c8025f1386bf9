package prefork

import (
	"os"

	"golang.org/x/sys/unix"
)

// roomForDatagrams leaves a bus socket as it is: on Linux a datagram is
// bounded by the send buffer (net.core.wmem_default, 208 KB).
func roomForDatagrams(fd int) {}

// descriptorDropped: Linux delivers a message whose descriptor did not fit
// (MSG_CTRUNC), and the read does not fail.
func descriptorDropped(err error) bool { return false }

// socketpairs makes a pair of typ, close-on-exec from the start.
func socketpairs(typ int) ([2]int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fds, os.NewSyscallError("socketpair", err)
	}
	return fds, nil
}
