package prefork

import (
	"net"
	"os"
	"sync"

	"github.com/m0serve/m0/internal/wire"
)

// Margin is how many fewer connections a sibling must have open for the
// worker that accepted one to hand it over: one would hand connections
// back and forth between two workers level but for the one in hand.
const Margin = 2

// balancer is a worker's listener: the connections it accepts from the
// shared listener, less those it hands to a less loaded sibling, and those
// its siblings hand it.
type balancer struct {
	ln     net.Listener
	keep   bool // hand nothing over
	w      *Worker
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// Balance returns the listener the worker serves: ln's connections,
// each handed (SCM_RIGHTS) to the sibling with the fewest open when that
// one has Margin fewer than this worker, and the connections siblings
// hand it. Every connection counts on the page while it is open, so that
// long-lived keep-alive connections and held streams spread across the
// workers, and not only their arrivals.
// With keep, every connection stays where it was accepted.
func (w *Worker) Balance(ln net.Listener, keep bool) net.Listener {
	b := &balancer{ln: ln, w: w, keep: keep, conns: make(chan net.Conn), closed: make(chan struct{})}
	w.Page.Reset(w.Index)
	w.Page.SetServing(w.Index, os.Getpid())
	go wire.AcceptLoop(ln, b.closed, b.place)
	go b.handed()
	return b
}

// place keeps c or hands it over.
func (b *balancer) place(c net.Conn) {
	w, p := b.w, b.w.Page
	mine := p.Open(w.Index)
	if j := b.least(); !b.keep && j >= 0 && p.Open(j).Load()+Margin <= mine.Load() {
		// Counted on the sibling from now, so that a burst of arrivals
		// is not all handed to one before it has taken the first.
		p.Open(j).Add(1)
		if w.Bus.Hand(j, c) {
			return
		}
		p.Open(j).Add(-1)
	}
	mine.Add(1)
	b.deliver(wire.Counted(c, mine))
}

// least is the serving sibling with the fewest connections open, or -1.
func (b *balancer) least() int {
	w, p := b.w, b.w.Page
	best, open := -1, int64(0)
	for j := range w.Workers {
		if j == w.Index || !p.Serving(j) {
			continue
		}
		if n := p.Open(j).Load(); best < 0 || n < open {
			best, open = j, n
		}
	}
	return best
}

// handed serves what siblings hand this worker; the sibling counted each
// on this worker's slot already.
func (b *balancer) handed() {
	mine := b.w.Page.Open(b.w.Index)
	for {
		select {
		case c := <-b.w.Bus.Conns():
			b.deliver(wire.Counted(c, mine))
		case <-b.closed:
			return
		}
	}
}

func (b *balancer) deliver(c net.Conn) {
	select {
	case b.conns <- c:
	case <-b.closed:
		c.Close()
	}
}

func (b *balancer) Accept() (net.Conn, error) {
	select {
	case c := <-b.conns:
		return c, nil
	case <-b.closed:
		return nil, net.ErrClosed
	}
}

// Close stops taking connections: siblings stop handing this worker any,
// and the shared listener is closed in this process only.
func (b *balancer) Close() error {
	var err error
	b.once.Do(func() {
		b.w.Page.SetServing(b.w.Index, 0)
		close(b.closed)
		err = b.ln.Close()
	})
	return err
}

func (b *balancer) Addr() net.Addr { return b.ln.Addr() }
