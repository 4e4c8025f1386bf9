//go:build linux && !race && !msan && !asan

package sock

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// RawIO reads and writes a TCP connection with raw system calls, inside
// its RawConn's wait for readiness: the descriptor is non-blocking (Go's
// poller owns it), so a call never blocks, and without the runtime's
// syscall entry (entersyscall) none wakes the runtime's monitor from its
// sleep or marks the P for it to take. Everything else is the TCPConn's.
// The descriptor must stay non-blocking: File, which makes it blocking,
// is not for a RawIO's connection.
type RawIO struct {
	*net.TCPConn
	raw rawConn
}

// RawUnixIO is RawIO for a Unix stream socket's connection.
type RawUnixIO struct {
	*net.UnixConn
	raw rawConn
}

// rawConn is what RawIO and RawUnixIO share: the descriptor's RawConn,
// each direction's call, and the connection an error names.
type rawConn struct {
	rc syscall.RawConn
	r  rawOp // Read's
	w  rawOp // Write's
	c  net.Conn
}

// rawOp is one direction's call: its callback is bound once, so a call
// allocates nothing; mu keeps two calls of a direction apart.
type rawOp struct {
	mu    sync.Mutex
	p     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// NewRawIO returns c read and written through RawIO when it is a TCP
// connection, through RawUnixIO when it is a Unix socket's, and c itself
// otherwise.
func NewRawIO(c net.Conn) net.Conn {
	switch t := c.(type) {
	case *net.TCPConn:
		x := &RawIO{TCPConn: t}
		if x.raw.init(t) {
			return x
		}
	case *net.UnixConn:
		x := &RawUnixIO{UnixConn: t}
		if x.raw.init(t) {
			return x
		}
	}
	return c
}

// init binds r to c's descriptor; false when c has none.
func (r *rawConn) init(c interface {
	net.Conn
	SyscallConn() (syscall.RawConn, error)
}) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	r.rc, r.c = rc, c
	r.r.fn = r.r.read
	r.w.fn = r.w.write
	return true
}

// NetConn returns the TCP connection.
func (c *RawIO) NetConn() net.Conn { return c.TCPConn }

func (c *RawIO) Read(p []byte) (int, error)  { return c.raw.read(p) }
func (c *RawIO) Write(p []byte) (int, error) { return c.raw.call(&c.raw.w, p, "write") }

// NetConn returns the Unix socket's connection.
func (c *RawUnixIO) NetConn() net.Conn { return c.UnixConn }

func (c *RawUnixIO) Read(p []byte) (int, error)  { return c.raw.read(p) }
func (c *RawUnixIO) Write(p []byte) (int, error) { return c.raw.call(&c.raw.w, p, "write") }

// read, RawConn.Read's callback: false to wait for readiness.
func (o *rawOp) read(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&o.p[0])), uintptr(len(o.p)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		o.n, o.errno = int(r), e
		return true
	}
}

// write, RawConn.Write's callback: it sends all of p it can, and false to
// wait for readiness with the rest.
func (o *rawOp) write(fd uintptr) bool {
	for o.n < len(o.p) {
		r, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&o.p[o.n])), uintptr(len(o.p)-o.n),
			syscall.MSG_NOSIGNAL, 0, 0)
		switch {
		case e == syscall.EINTR:
		case e == syscall.EAGAIN:
			return false
		case e != 0:
			o.errno = e
			return true
		case r == 0 || int(r) > len(o.p)-o.n:
			o.errno = syscall.EIO // as net's own sees it: a send that took nothing, or more than it was given
			return true
		default:
			o.n += int(r)
		}
	}
	return true
}

// read is Read: EOF at a read of nothing.
func (c *rawConn) read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.call(&c.r, p, "read")
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	if err != nil {
		n = 0
	}
	return n, err
}

// call runs o's callback on p through the RawConn's wait (op's direction),
// and returns what it moved and the error, named as net's own.
func (c *rawConn) call(o *rawOp, p []byte, op string) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.p, o.n, o.errno = p, 0, 0
	var err error
	if op == "read" {
		err = c.rc.Read(o.fn)
	} else {
		err = c.rc.Write(o.fn)
	}
	n, errno := o.n, o.errno
	o.p = nil
	switch {
	case err != nil:
		return n, named(err, op)
	case errno != 0:
		return n, c.opError(op, errno)
	}
	return n, nil
}

func (c *rawConn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: c.c.LocalAddr().Network(), Source: c.c.LocalAddr(), Addr: c.c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}

// named gives an error of the RawConn's (a deadline, a closed connection)
// the operation net's own Read and Write name ("read", not "raw-read"):
// net/http tells a read error of a closing connection by it.
func named(err error, op string) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "raw-"+op {
		cp := *oe
		cp.Op = op
		return &cp
	}
	return err
}

// Raw reports whether c, or a connection under it (NetConn), is read and
// written with raw system calls: a RawIO or a RawUnixIO.
func Raw(c net.Conn) bool {
	if _, ok := Find[*RawIO](c); ok {
		return true
	}
	_, ok := Find[*RawUnixIO](c)
	return ok
}
