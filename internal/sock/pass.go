package sock

import (
	"errors"
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// The connection wrappers of the front ends (the strict reading's, the
// limits', the count's) pass on what the connection below can do, with
// these: each wrapper's method is one call.

// RawConn gives c's descriptor (syscall.Conn), or errors.ErrUnsupported.
func RawConn(c net.Conn) (syscall.RawConn, error) {
	if sc, ok := c.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// CloseWrite shuts c's sending half, or returns errors.ErrUnsupported
// where c has none to shut alone.
func CloseWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// ReadFrom sends what r holds on c with c's own ReadFrom (sendfile for a
// file on a TCP socket), or copies it.
func ReadFrom(c net.Conn, r io.Reader) (int64, error) {
	if rf, ok := c.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c}, r)
}

// Find returns the connection of type T under c, through the wrappers that
// give theirs with NetConn (c itself first).
func Find[T net.Conn](c net.Conn) (T, bool) {
	var found T
	ok := Each(c, func(l net.Conn) bool {
		t, is := l.(T)
		if is {
			found = t
		}
		return is
	})
	return found, ok
}

// Each calls f with c and each connection under it, through the wrappers
// that give theirs with NetConn, until f returns true; it reports whether
// one did.
func Each(c net.Conn, f func(net.Conn) bool) bool {
	for c != nil {
		if f(c) {
			return true
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	return false
}

// Cork holds back c's partial segments (TCP_CORK; nothing on macOS) until the function it
// returns is called, which sends what is left: a response's head and the
// start of its body leave in full segments rather than the head alone,
// what nginx's tcp_nopush does around sendfile. Both do nothing on a
// connection without a TCP descriptor.
func Cork(c net.Conn) (uncork func()) {
	if corkOption == 0 {
		return func() {}
	}
	set := func(v int) {
		WithFD(c, func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, corkOption, v) })
	}
	set(1)
	return func() { set(0) }
}
