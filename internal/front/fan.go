package front

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/m0serve/m0/internal/sock"
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

// Fan returns n listeners that share ln's connections, each going to the
// one with the fewest open (docs/architecture.md: several accept loops on
// one descriptor do not share the load). Closing any of them closes ln.
func Fan(ln net.Listener, n int) []net.Listener {
	f := newFan(ln, n)
	go f.run()
	lns := make([]net.Listener, n)
	for i, l := range f.loops {
		lns[i] = l
	}
	return lns
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

// run accepts until the listener closes, each connection for the loop
// with the fewest open.
func (f *fanListener) run() {
	sock.AcceptLoop(f.Listener, f.closed, func(c net.Conn) {
		l := f.pick()
		l.open.Add(1)
		select {
		case l.conns <- sock.Counted(c, &l.open):
		case <-f.closed:
			c.Close()
		}
	})
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
