package prefork

import (
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/m0serve/m0/internal/sock"
	"golang.org/x/sys/unix"
)

// Margin is how many fewer connections a sibling must have open for the
// worker that accepted one to hand it over: one would hand connections
// back and forth between two workers level but for the one in hand.
const Margin = 2

// balancer is a worker's listener: the connections it accepts from the
// shared listener, less those it hands to a less loaded sibling, and those
// its siblings hand it.
type balancer struct {
	ln       net.Listener
	keep     bool // hand nothing over
	w        *Worker
	conns    chan net.Conn  // placed here, for Accept
	stopping chan struct{}  // closed as Close begins: accept no more
	placing  sync.WaitGroup // the accept loop and the handed connections' reader
	closed   chan struct{}  // closed once everything accepted is in conns
	once     sync.Once

	room     int64         // connections a sibling may hold before it is handed no more (handReserve)
	pause    time.Duration // FullPause, as Balance found it
	resume   *time.Timer   // ends the pause the last loss began (handed's goroutine only)
	endPause chan struct{} // has it end now (tests; only after a loss)
	throttle sock.Throttle
}

// FullPause is how long siblings hand nothing to a worker that could not
// take a connection one handed it (out of descriptors): each such
// connection is lost, where one the worker's own accept cannot take waits
// in the listener's queue. The pause starts again at each loss.
var FullPause = time.Second

// backlog is how many placed connections may wait for the server's Accept.
const backlog = 64

// Out of descriptors, a worker takes no connection it has no descriptor
// for: one its own accept cannot take waits in the listener's queue, but
// one a sibling handed it would be lost (it takes a descriptor on
// arrival and, briefly, a second: Go's FileConn duplicates it). Its
// siblings' connections are in flight to it while it accepts its own, so
// each worker counts them as they are sent (Page.Open) and keeps the sum
// under budgets the descriptor limit sets (the workers share the limit,
// and start alike): budget is the descriptor limit less the descriptors a
// worker holds at the start (this one's, counted as it begins to
// balance); a worker's own accepts stop (and are retried, as a failed
// accept is) at budget less ownReserve, and its siblings hand it nothing
// from budget less handReserve, so that what is in flight to it when its
// own accepts stop fits. The difference leaves the application room for
// files and sockets of its own; a worker that runs out all the same loses
// what it is handed, and is paused (lost).
const (
	ownReserve  = 4
	handReserve = 16
)

// descriptorBudget is how many connections a worker may hold: the
// descriptor limit less the descriptors open in this worker now. Without
// a limit to read, or a count, there is no bound.
func descriptorBudget() int64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= math.MaxInt32 {
		return math.MaxInt64
	}
	open, err := os.ReadDir("/dev/fd") // Linux's links /proc/self/fd; one more for the directory read
	if err != nil {
		return math.MaxInt64
	}
	return int64(lim.Cur) - int64(len(open))
}

// budgeted is the shared listener as a balancing worker accepts from it:
// past its budget an accept fails, as out of descriptors, without taking
// the connection from the queue.
type budgeted struct {
	net.Listener
	open *atomic.Int64
	max  int64
}

func (l budgeted) Accept() (net.Conn, error) {
	if n := l.open.Load(); n >= l.max {
		return nil, fmt.Errorf("%w: %d connections open, the most the descriptor limit leaves room for", syscall.EMFILE, n)
	}
	return l.Listener.Accept()
}

// Balance returns the listener the worker serves: ln's connections,
// each handed (SCM_RIGHTS) to the sibling with the fewest open when that
// one has Margin fewer than this worker, and the connections siblings
// hand it. Every connection counts on the page while it is open, so that
// long-lived keep-alive connections and held streams spread across the
// workers, and not only their arrivals.
// With keep, every connection stays where it was accepted.
func (w *Worker) Balance(ln net.Listener, keep bool) net.Listener {
	b := &balancer{ln: ln, w: w, keep: keep, conns: make(chan net.Conn, backlog), pause: FullPause,
		stopping: make(chan struct{}), closed: make(chan struct{}), endPause: make(chan struct{}, 1)}
	w.Page.Reset(w.Index)
	w.Page.SetServing(w.Index, os.Getpid())
	own := ln
	if budget := descriptorBudget(); keep || budget == math.MaxInt64 {
		b.room = math.MaxInt64
	} else {
		b.room = budget - handReserve
		// At least one of its own, however little the limit leaves.
		own = budgeted{Listener: ln, open: w.Page.Open(w.Index), max: max(budget-ownReserve, 1)}
	}
	b.placing.Add(2)
	go func() {
		defer b.placing.Done()
		sock.AcceptLoop(own, b.stopping, b.place)
	}()
	go func() {
		defer b.placing.Done()
		b.handed()
	}()
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
	b.deliver(sock.Counted(c, mine))
}

// least is the serving sibling with the fewest connections open, or -1:
// one that has room for another (handReserve) and is not paused after a loss.
func (b *balancer) least() int {
	w, p := b.w, b.w.Page
	best, open := -1, int64(0)
	for j := range w.Workers {
		if j == w.Index || !p.Takes(j) {
			continue
		}
		if n := p.Open(j).Load(); n < b.room && (best < 0 || n < open) {
			best, open = j, n
		}
	}
	return best
}

// handed serves what siblings hand this worker; the sibling counted each
// on this worker's slot already. Once the worker stops, what is still
// handed to it goes on to a sibling that serves (deliver).
func (b *balancer) handed() {
	b.serveHanded(b.stopping)
	go b.serveHanded(b.w.Bus.done)
}

// serveHanded takes what siblings hand this worker, and ends the pause a
// loss began, until until is closed. One goroutine at a time.
func (b *balancer) serveHanded(until <-chan struct{}) {
	mine := b.w.Page.Open(b.w.Index)
	var resumed <-chan time.Time
	if b.resume != nil {
		resumed = b.resume.C
	}
	for {
		select {
		case c := <-b.w.Bus.Conns():
			b.deliver(sock.Counted(c, mine))
		case err := <-b.w.Bus.Lost():
			resumed = b.lost(err)
		case <-resumed:
			b.w.Page.SetTaking(b.w.Index, os.Getpid(), true) // not once the worker stops
		case <-b.endPause:
			b.resume.Reset(0)
		case <-until:
			return
		}
	}
}

// lost takes off this worker's count a connection a sibling handed it and
// it could not take, says so (at most once per sock.LogEvery), and has the
// siblings hand it nothing for FullPause (Page.SetTaking), from this loss:
// until then each keeps what it accepts, and one that runs out of
// descriptors too leaves the next connection in the listener's queue,
// where it waits rather than is lost. It returns the channel that ends the
// pause.
func (b *balancer) lost(err error) <-chan time.Time {
	w := b.w
	// Never below 0: on macOS a dropped descriptor is not known to be a
	// connection's (a successor's journal carries descriptors too).
	open := w.Page.Open(w.Index)
	for n := open.Load(); n > 0 && !open.CompareAndSwap(n, n-1); n = open.Load() {
	}
	if n, ok := b.throttle.Note(); ok {
		w.Bus.log.Warn("m0serve: lost a connection a sibling handed this worker; siblings keep theirs for a while",
			"error", err.Error(), "pause", b.pause.String(), "lost", n)
	}
	w.Page.SetTaking(w.Index, os.Getpid(), false) // not once the worker stops
	if b.resume == nil {
		b.resume = time.NewTimer(b.pause)
	} else {
		b.resume.Reset(b.pause) // a pending expiry is discarded (Go 1.23 timers)
	}
	return b.resume.C
}

// deliver queues c for Accept. Once the worker has begun to stop, a
// connection there is no room for goes to a sibling that serves, or is
// closed when none does.
func (b *balancer) deliver(c *sock.CountedConn) {
	select {
	case <-b.closed: // Accept returns nothing more
	default:
		select {
		case b.conns <- c:
			return
		case <-b.stopping:
		}
		select {
		case b.conns <- c: // Accept returns it yet
			return
		default:
		}
	}
	if j := b.least(); j >= 0 && !b.keep {
		b.w.Page.Open(j).Add(1)
		if b.w.Bus.Hand(j, c.Conn) {
			c.Uncount()
			return
		}
		b.w.Page.Open(j).Add(-1)
	}
	c.Close()
}

// Accept returns the next connection placed here; once closed, those
// accepted before the close first, so that none is dropped unserved.
func (b *balancer) Accept() (net.Conn, error) {
	select {
	case c := <-b.conns:
		return c, nil
	case <-b.closed:
	}
	select {
	case c := <-b.conns:
		return c, nil
	default:
		return nil, net.ErrClosed
	}
}

// QuiesceWait is how long a worker that begins to stop goes on taking the
// connections siblings hand it after it has told them to stop: one handed
// in the instant before arrives within it.
const QuiesceWait = 50 * time.Millisecond

// Quiesce tells the siblings to hand this worker no more connections, and
// returns when any handed meanwhile has arrived. The drain calls it before
// Close.
func (b *balancer) Quiesce() {
	b.w.Page.SetServing(b.w.Index, 0)
	time.Sleep(QuiesceWait)
}

// Close stops taking connections: siblings stop handing this worker any,
// the shared listener is closed in this process only, and the connections
// accepted before it are left for Accept to return.
func (b *balancer) Close() error {
	var err error
	b.once.Do(func() {
		b.w.Page.SetServing(b.w.Index, 0)
		close(b.stopping)
		err = b.ln.Close()
		b.placing.Wait() // what was accepted or handed is queued
		close(b.closed)
	})
	return err
}

func (b *balancer) Addr() net.Addr { return b.ln.Addr() }
