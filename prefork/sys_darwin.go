package prefork

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// roomForDatagrams raises a bus socket's buffers to carry a whole message
// (maxDatagram): macOS bounds a local datagram by the send buffer, 2 KB
// unless raised (net.local.dgram.maxdgram), and queues by the receive
// buffer.
func roomForDatagrams(fd int) {
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 2*maxDatagram)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4*maxDatagram)
}

// descriptorDropped reports a read that failed because the descriptor the
// message carried did not fit (XNU's unp_externalize: EMSGSIZE, or out of
// memory); the message is gone and the next one is read.
func descriptorDropped(err error) bool {
	return errors.Is(err, syscall.EMSGSIZE) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// socketpairs makes a pair of typ, close-on-exec before any fork can see
// it (macOS has no SOCK_CLOEXEC): under syscall.ForkLock, as Go's own
// sockets are made.
func socketpairs(typ int) ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, typ, 0)
	if err != nil {
		return fds, os.NewSyscallError("socketpair", err)
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	return fds, nil
}
