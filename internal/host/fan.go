package host

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// fanListener accepts for several loops (--threads N): each connection
// goes to the loop with the fewest open, the next in turn among equals, so
// that the loops share the load whatever the scheduler does. Two servers
// blocking in Accept on one descriptor do not: the one that just accepted
// takes the next connection too.
type fanListener struct {
	net.Listener // the shared one
	loops        []*loopListener
	next         int
	closed       chan struct{}
	once         sync.Once
	err          error
}

// loopListener is one loop's side of a fanListener.
type loopListener struct {
	fan   *fanListener
	conns chan net.Conn
	open  atomic.Int64
}

func newFan(ln net.Listener, n int) *fanListener {
	f := &fanListener{Listener: ln, closed: make(chan struct{})}
	for range n {
		f.loops = append(f.loops, &loopListener{fan: f, conns: make(chan net.Conn)})
	}
	return f
}

// Close closes the shared listener once: the first loop's drain closes
// it, the others find it closed.
func (f *fanListener) Close() error {
	f.once.Do(func() {
		close(f.closed)
		f.err = f.Listener.Close()
	})
	return f.err
}

// run accepts until the listener closes. A failure to accept (out of
// descriptors, say) is retried after a pause that doubles up to a second,
// as net/http and fasthttp do.
func (f *fanListener) run() {
	var pause time.Duration
	for {
		c, err := f.Listener.Accept()
		if err != nil {
			select {
			case <-f.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			slog.Warn("m0serve: cannot accept a connection; retrying", "error", err.Error(), "in", pause.String())
			select {
			case <-time.After(pause):
			case <-f.closed:
				return
			}
			continue
		}
		pause = 0
		l := f.pick()
		l.open.Add(1)
		select {
		case l.conns <- &fanConn{Conn: c, l: l}:
		case <-f.closed:
			c.Close()
			return
		}
	}
}

func (f *fanListener) pick() *loopListener {
	best := -1
	for i := range f.loops {
		j := (f.next + i) % len(f.loops)
		if best < 0 || f.loops[j].open.Load() < f.loops[best].open.Load() {
			best = j
		}
	}
	f.next = (best + 1) % len(f.loops)
	return f.loops[best]
}

func (l *loopListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.fan.closed:
		return nil, net.ErrClosed
	}
}

func (l *loopListener) Close() error   { return l.fan.Close() }
func (l *loopListener) Addr() net.Addr { return l.fan.Addr() }

// fanConn counts itself open on its loop until it is closed, and passes
// on what the connection below can do (limitConn asks for each).
type fanConn struct {
	net.Conn
	l    *loopListener
	once sync.Once
}

func (c *fanConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// SyscallConn gives the connection's descriptor (wire.WatchClose, the
// keepalive of held sockets).
func (c *fanConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// CloseWrite half-closes the connection when the underlying one can.
func (c *fanConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// ReadFrom sends with sendfile when the underlying connection can.
func (c *fanConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c}, r)
}
