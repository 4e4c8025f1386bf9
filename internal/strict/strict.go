package strict

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/m0serve/m0/internal/sock"
)

// RefusedTarget is the target of the request a Conn hands its front
// end in place of a refused head: the front end parses it, and the server's
// outermost handler answers it with the refusal (Refused) without calling
// anything. It holds 128 random bits: no client can name it.
var RefusedTarget = func() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "/.m0-refused/" + hex.EncodeToString(b)
}()

var refusedHead = []byte("GET " + RefusedTarget + " HTTP/1.1\r\nHost: m0\r\nConnection: close\r\n\r\n")

// Listen returns ln with each connection it accepts read through a
// Framer: the front end serving it sees only requests the Framer passed.
// capBytes is the Framer's Cap (zero or less: none).
func Listen(ln net.Listener, capBytes int64) net.Listener {
	return strictListener{ln, max(capBytes, 0)}
}

type strictListener struct {
	net.Listener
	cap int64
}

func (l strictListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: sock.NewRawIO(c), f: Framer{Cap: l.cap}}, nil
}

// Conn is a connection whose reads reach its front end only as its
// Framer passes them. A refused head is replaced by a request for
// RefusedTarget, after which the connection reads as closed; a refused
// body reads as an error, the *Rejection. After an upgrade request nothing
// is read until it is answered: a response that begins "HTTP/1.x 101"
// written on the connection switches it (everything after passes as it
// comes), and Served with the request's number, once it was answered
// otherwise, reads on as HTTP.
type Conn struct {
	net.Conn
	mu      sync.Mutex
	f       Framer
	held    []byte // read, not yet passed: an unfinished head, or all after a held upgrade
	heldAt  int64  // when held's first bytes arrived (a sock.Mono reading); 0 while empty
	rescan  bool   // held may hold whole heads: scan it before reading more
	ready   []byte // passed, not yet read
	said    bool   // the request for RefusedTarget has been handed out
	rdl     time.Time
	wake    chan struct{} // a hold released, or a read deadline set
	holding atomic.Bool
	refused atomic.Pointer[Rejection]
}

// NetConn returns the connection Conn reads.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Rejection returns the refusal that ended the connection's requests, if
// any. Safe from any goroutine.
func (c *Conn) Rejection() *Rejection { return c.refused.Load() }

// Held reports whether bytes have arrived that were not passed on yet (an
// unfinished head): the connection is not unused.
func (c *Conn) Held() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held) > 0
}

// Between reports whether the connection is between requests with
// nothing of the next one read: no head begun, none passed and not yet
// read, no hold, no refusal. What the socket holds is not looked at.
func (c *Conn) Between() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held) == 0 && len(c.ready) == 0 && c.f.state == inHead && c.f.Err == nil
}

// Served says request number n (from 1) on the connection was answered,
// and did not switch protocols (a handler returned without taking the
// connection over): an upgrade request the reading holds for is over.
func (c *Conn) Served(n int) {
	if !c.holding.Load() {
		return
	}
	c.mu.Lock()
	c.f.Resume(n)
	c.settle()
	c.mu.Unlock()
}

// settle, under mu, keeps holding in step with the Framer and wakes a
// Read waiting for the hold to end.
func (c *Conn) settle() {
	h := c.f.Holding()
	if c.holding.Load() && !h {
		c.rescan = true
		c.poke()
	}
	c.holding.Store(h)
}

func (c *Conn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Write switches a held connection when p is a 101 response.
func (c *Conn) Write(p []byte) (int, error) {
	if c.holding.Load() && len(p) >= 13 && string(p[:5]) == "HTTP/" && string(p[8:13]) == " 101 " {
		c.mu.Lock()
		c.f.Switch()
		c.settle()
		c.mu.Unlock()
	}
	return c.Conn.Write(p)
}

func (c *Conn) SetReadDeadline(t time.Time) error {
	c.setRDL(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *Conn) SetDeadline(t time.Time) error {
	c.setRDL(t)
	return c.Conn.SetDeadline(t)
}

func (c *Conn) setRDL(t time.Time) {
	c.mu.Lock()
	c.rdl = t
	if c.wake != nil {
		c.poke()
	}
	c.mu.Unlock()
}

func (c *Conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if len(c.ready) > 0 {
			n := copy(p, c.ready)
			c.ready = c.ready[n:]
			if len(c.ready) == 0 {
				c.ready = nil
			}
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
		if c.f.Holding() {
			if err := c.await(); err != nil {
				return 0, err
			}
			continue
		}
		if c.rescan || c.f.Passing() && len(c.held) > 0 {
			c.rescan = false
			k, m := c.scan(c.held)
			c.ready, c.held = c.held[:m], c.held[k:]
			if len(c.held) == 0 || c.f.Err != nil {
				c.held = nil
			}
			c.noteHeld(m > 0)
			continue
		}
		if len(c.held) == 0 {
			c.mu.Unlock()
			n, err := c.Conn.Read(p)
			c.mu.Lock()
			if n > 0 {
				k, m := c.scan(p[:n])
				if k < n && c.f.Err == nil { // an unfinished head, or after a held upgrade
					c.held = append(make([]byte, 0, max(2*(n-k), 4<<10)), p[k:n]...)
					c.noteHeld(true)
				}
				if m > 0 {
					return m, nil
				}
			}
			if err != nil {
				return 0, err
			}
			continue
		}
		if len(c.held) == cap(c.held) {
			c.held = append(make([]byte, 0, min(max(2*len(c.held), 4<<10), MaxHead+4<<10)), c.held...)
		}
		buf := c.held[len(c.held):cap(c.held)]
		c.mu.Unlock()
		n, err := c.Conn.Read(buf)
		c.mu.Lock()
		c.held = c.held[:len(c.held)+n]
		if n > 0 {
			k, m := c.scan(c.held)
			c.ready, c.held = c.held[:m], c.held[k:]
			if c.f.Err != nil {
				c.held = nil
			}
			c.noteHeld(m > 0)
		}
		if err != nil && len(c.ready) == 0 {
			return 0, err
		}
	}
}

// noteHeld, under mu, marks when what is held began to arrive: now, if
// it was empty or what was held before it passed on.
func (c *Conn) noteHeld(passed bool) {
	switch {
	case len(c.held) == 0:
		c.heldAt = 0
	case passed || c.heldAt == 0:
		c.heldAt = sock.Mono()
	}
}

// HeadSince returns when the first bytes of an unfinished head arrived (a
// sock.Mono reading), or 0 when none is held: the front end reading the
// connection sees a head only once it is whole.
func (c *Conn) HeadSince() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f.Holding() || c.f.Err != nil {
		return 0
	}
	return c.heldAt
}

// await, under mu, waits for a hold to end or the read deadline to pass;
// the socket is not read meanwhile.
func (c *Conn) await() error {
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
	}
	var timeout <-chan time.Time
	if !c.rdl.IsZero() {
		d := time.Until(c.rdl)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	c.mu.Unlock()
	defer c.mu.Lock()
	select {
	case <-c.wake:
		return nil
	case <-timeout:
		return os.ErrDeadlineExceeded
	}
}

// scan, under mu, passes b through the Framer: it read b[:n], and passes
// b[:m].
func (c *Conn) scan(b []byte) (n, m int) {
	n, m, r := c.f.Scan(b)
	if r != nil {
		c.refused.Store(r)
	}
	c.settle()
	return n, m
}

// ReadFrom sends what r holds with the connection's own ReadFrom (sendfile
// for a file on a TCP socket).
func (c *Conn) ReadFrom(r io.Reader) (int64, error) { return sock.ReadFrom(c.Conn, r) }

// SyscallConn gives the connection's descriptor.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return sock.RawConn(c.Conn) }

// CloseWrite shuts the sending half, where the connection has one.
func (c *Conn) CloseWrite() error { return sock.CloseWrite(c.Conn) }

// Of returns the Conn under c (through wrappers that give
// theirs with NetConn), or nil.
func Of(c net.Conn) *Conn {
	s, _ := sock.Find[*Conn](c)
	return s
}

// Refused returns the refusal a request for target on c stands for: the
// request a Conn handed out in place of a refused head. Nil for any
// other request.
func Refused(c net.Conn, target []byte) *Rejection {
	if string(target) != RefusedTarget {
		return nil
	}
	if s := Of(c); s != nil {
		return s.Rejection()
	}
	return nil
}
