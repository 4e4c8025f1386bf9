package wire

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
)

// RefusedTarget is the target of the request a StrictConn hands its front
// end in place of a refused head: the front end parses it, and the server's
// outermost handler answers it with the refusal (Refused) without calling
// anything. It holds 128 random bits: no client can name it.
var RefusedTarget = func() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "/.m0-refused/" + hex.EncodeToString(b)
}()

var refusedHead = []byte("GET " + RefusedTarget + " HTTP/1.1\r\nHost: m0\r\nConnection: close\r\n\r\n")

// StrictListener returns ln with each connection it accepts read through a
// Framer: the front end serving it sees only requests the Framer passed.
func StrictListener(ln net.Listener) net.Listener { return strictListener{ln} }

type strictListener struct{ net.Listener }

func (l strictListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &StrictConn{Conn: c}, nil
}

// StrictConn is a connection whose reads reach its front end only as its
// Framer passes them. A refused head is replaced by a request for
// RefusedTarget, after which the connection reads as closed; a refused
// body reads as an error, the *Refusal.
type StrictConn struct {
	net.Conn
	f       Framer // of the reading goroutine
	held    []byte // read, not yet passed: an unfinished head
	ready   []byte // passed, not yet read
	said    bool   // the request for RefusedTarget has been handed out
	refused atomic.Pointer[Refusal]
	passing atomic.Bool
}

// NetConn returns the connection StrictConn reads.
func (c *StrictConn) NetConn() net.Conn { return c.Conn }

// Refusal returns the refusal that ended the connection's requests, if
// any. Safe from any goroutine.
func (c *StrictConn) Refusal() *Refusal { return c.refused.Load() }

// Passing reports whether the connection has stopped being read as HTTP
// after an upgrade request (Framer.Passing). Safe from any goroutine.
func (c *StrictConn) Passing() bool { return c.passing.Load() }

func (c *StrictConn) Read(p []byte) (int, error) {
	for {
		if len(c.ready) > 0 {
			n := copy(p, c.ready)
			c.ready = c.ready[n:]
			return n, nil
		}
		if r := c.f.Err; r != nil {
			if r.InBody {
				return 0, r
			}
			if !c.said {
				c.said, c.ready = true, refusedHead
				continue
			}
			return 0, io.EOF
		}
		if len(p) == 0 {
			return 0, nil
		}
		if len(c.held) == 0 {
			n, err := c.Conn.Read(p)
			if n > 0 {
				k, _ := c.scan(p[:n])
				if k < n && c.f.Err == nil { // an unfinished head
					c.held = append(make([]byte, 0, max(2*(n-k), 4<<10)), p[k:n]...)
				}
				if k > 0 {
					return k, nil
				}
			}
			if err != nil {
				return 0, err
			}
			continue
		}
		if len(c.held) == cap(c.held) {
			c.held = append(make([]byte, 0, min(2*cap(c.held), MaxHead+4<<10)), c.held...)
		}
		n, err := c.Conn.Read(c.held[len(c.held):cap(c.held)])
		c.held = c.held[:len(c.held)+n]
		if n > 0 {
			k, _ := c.scan(c.held)
			c.ready, c.held = c.held[:k], c.held[k:]
			if c.f.Err != nil {
				c.held = nil
			}
		}
		if err != nil && len(c.ready) == 0 {
			return 0, err
		}
	}
}

func (c *StrictConn) scan(b []byte) (int, *Refusal) {
	k, r := c.f.Scan(b)
	if r != nil {
		c.refused.Store(r)
	}
	if c.f.Passing() && !c.passing.Load() {
		c.passing.Store(true)
	}
	return k, r
}

// ReadFrom sends what r holds with the connection's own ReadFrom (sendfile
// for a file on a TCP socket).
func (c *StrictConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// SyscallConn gives the connection's descriptor.
func (c *StrictConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// CloseWrite shuts the sending half, where the connection has one.
func (c *StrictConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// StrictOf returns the StrictConn under c (through wrappers that give
// theirs with NetConn), or nil.
func StrictOf(c net.Conn) *StrictConn {
	for c != nil {
		if s, ok := c.(*StrictConn); ok {
			return s
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// Refused returns the refusal a request for target on c stands for: the
// request a StrictConn handed out in place of a refused head. Nil for any
// other request.
func Refused(c net.Conn, target []byte) *Refusal {
	if string(target) != RefusedTarget {
		return nil
	}
	if s := StrictOf(c); s != nil {
		return s.Refusal()
	}
	return nil
}
