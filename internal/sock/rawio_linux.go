//go:build linux && !race

package sock

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// RawIO reads and writes a TCP connection with raw system calls, inside
// its RawConn's wait for readiness: the descriptor is non-blocking (Go's
// poller owns it), so a call never blocks, and without the runtime's
// syscall entry (entersyscall) none wakes the runtime's monitor from its
// sleep or marks the P for it to take. Everything else is the TCPConn's.
type RawIO struct {
	*net.TCPConn
	rc syscall.RawConn
}

// NewRawIO returns c read and written through RawIO when it is a TCP
// connection, and c itself otherwise.
func NewRawIO(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &RawIO{TCPConn: tc, rc: rc}
}

// NetConn returns the TCP connection.
func (c *RawIO) NetConn() net.Conn { return c.TCPConn }

func (c *RawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			n, errno = int(r), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, c.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *RawIO) Write(p []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			r, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&p[written])), uintptr(len(p)-written),
				syscall.MSG_NOSIGNAL, 0, 0)
			switch e {
			case 0:
				written += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return written, err
	case errno != 0:
		return written, c.opError("write", errno)
	}
	return written, nil
}

func (c *RawIO) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}
