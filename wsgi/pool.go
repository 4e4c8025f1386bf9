package wsgi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/wire"
)

// Pool is the Python threads WSGI handlers run requests on. Each handler
// has one of its own unless Options.Pool gives it one to share: several
// applications mounted in one process then share one bound on how many
// requests run Python at once, as they share one interpreter.
type Pool struct {
	slots  *pool
	one    *thread // with no threads, the one Python thread
	stream bool    // a body without a Content-Length streams from its thread
}

// NewPool returns a pool of n threads, as Options.Threads counts them:
// AutoThreads (0) is min(cores, 8), and NoPool (any negative) one
// dedicated Python thread on which every request runs, its response
// bodies buffered.
func NewPool(n int) *Pool {
	rt, err := cpython.Start()
	if err != nil {
		panic("wsgi: " + err.Error())
	}
	threads := poolSize(n, rt.Interp.GILDisabled)
	if threads == 0 {
		return &Pool{slots: newPool(1), one: newThread(rt)}
	}
	return &Pool{slots: newPool(threads), stream: true}
}

// poolSize is the number of Python threads n resolves to, 0 for none.
func poolSize(n int, parallel bool) int {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return wire.PoolSize(wire.AutoThreads, parallel)
	}
	return n
}

// Shutdown answers new requests of every handler on the pool 503 and
// waits for the running ones, as Handler.Shutdown does; a second call
// returns ErrClosed.
func (p *Pool) Shutdown(ctx context.Context) error { return p.slots.shutdown(ctx) }

// Expected is how long a request has held a thread lately (a decaying
// maximum): a drain cuts off the waiting requests that long before its
// bound, so that the ones still given a thread can finish within it.
func (p *Pool) Expected() time.Duration { return time.Duration(p.slots.longest.Load()) }

// SetMaxWait bounds how long a request waits for a thread when none is
// free: past d it is answered 503 with Retry-After, before the application
// sees it (FrankenPHP's max_wait_time, m0serve's --max-queue-wait). Zero,
// the default, waits as long as the request lasts. Safe at any time.
func (p *Pool) SetMaxWait(d time.Duration) { p.slots.maxWait.Store(int64(max(d, 0))) }

// SetTimeout bounds how long a request may run the application before its
// response begins (m0serve's --timeout, gunicorn's worker timeout): past d,
// a line naming the request and then every Python thread's stack
// (faulthandler) go to standard error as one record, the request's thread
// is interrupted (_m0.RequestTimeout, a BaseException, is raised in it at
// its next bytecode) and the request is answered 504. A thread blocked in
// one C call (a query waiting on its database) hears of it when the call
// returns. A response already streaming is not bounded. stuck, if not nil,
// is called once each time every thread of the pool is past d at once
// (m0serve replaces the worker). Call it before the pool serves; zero is no
// bound.
func (p *Pool) SetTimeout(d time.Duration, stuck func()) {
	if d <= 0 {
		return
	}
	s := p.slots
	s.timeout.Store(int64(d))
	s.stuck = stuck
	s.watcher.Do(func() { go s.watchdog(d) })
}

// PoolStats are a pool's counts, since it was made unless said otherwise.
type PoolStats struct {
	Threads  int           // Python threads
	Busy     int           // threads running a request now
	Waiting  int64         // requests waiting for a thread now
	Waited   uint64        // requests that found no thread free and waited for one
	WaitTime time.Duration // how long they waited, in all
	TimedOut uint64        // answered 503 after SetMaxWait's bound
	CutOff   uint64        // answered 503 by a drain (Cutoff, Shutdown)
	Held     time.Duration // how long requests held a thread, in all (counted as each lets go)
}

// Stats returns the pool's counts.
func (p *Pool) Stats() PoolStats {
	s := p.slots
	return PoolStats{Threads: s.n, Busy: s.n - len(s.slots), Waiting: s.waiting.Load(), Waited: s.waited.Load(),
		WaitTime: time.Duration(s.waitNs.Load()), TimedOut: s.timedOut.Load(), CutOff: s.cutOff.Load(),
		Held: time.Duration(s.heldNs.Load())}
}

// Cutoff answers 503 (Retry-After, Connection: close) every request of
// the pool's handlers waiting for a thread, and from then on every one
// that finds none free: a server calls it shortly before its drain's bound
// would end the process with them unanswered. Requests running Python
// finish as before.
func (p *Pool) Cutoff() { p.slots.cutoff() }

// pool bounds how many requests run Python at once: one slot per Python
// thread. A request takes a slot, locks its goroutine to its OS thread and
// runs the application there, on that thread's own thread state; no
// request changes OS threads midway, and none waits for a hand-off. When
// every slot is taken, requests wait in Go.
type pool struct {
	slots   chan int // the free slots
	closed  chan struct{}
	once    sync.Once
	cut     chan struct{} // closed by Cutoff: a request waits for no slot
	cutOne  sync.Once
	n       int
	began   []int64      // per slot, when its request took it (a sock.Mono reading)
	longest atomic.Int64 // a decaying maximum of how long a request held its slot (ns)
	maxWait atomic.Int64 // SetMaxWait's bound (ns); 0 none

	timeout atomic.Int64              // SetTimeout's bound (ns); 0 none
	watch   []atomic.Pointer[watched] // per slot, the request running the application, under a timeout
	stuck   func()                    // SetTimeout's
	watcher sync.Once

	waiting          atomic.Int64
	waited, timedOut atomic.Uint64
	cutOff           atomic.Uint64
	waitNs           atomic.Int64
	heldNs           atomic.Int64 // how long requests held their slots, in all (those released)
}

// Why a request was given no slot.
type refusal int

const (
	given     refusal = iota
	drained           // the pool is shut down, or cut off
	waitedOut         // SetMaxWait's bound passed
	gone              // the request's context ended
)

func newPool(n int) *pool {
	p := &pool{slots: make(chan int, n), closed: make(chan struct{}), cut: make(chan struct{}), n: n, began: make([]int64, n),
		watch: make([]atomic.Pointer[watched], n)}
	for i := range n {
		p.slots <- i
	}
	return p
}

// acquire takes a slot, or says why it took none: the pool is shut down
// or cut off, its wait bound passed, or ctx ended first.
func (p *pool) acquire(ctx context.Context) (int, refusal) {
	select {
	case <-p.closed:
		p.cutOff.Add(1)
		return 0, drained
	default:
	}
	select {
	case i := <-p.slots: // a free slot: no need to watch ctx (its Done costs net/http a channel)
		p.began[i] = sock.Mono()
		return i, given
	default:
	}
	start := time.Now()
	p.waiting.Add(1)
	var bound <-chan time.Time
	if d := p.maxWait.Load(); d > 0 {
		t := time.NewTimer(time.Duration(d))
		defer t.Stop()
		bound = t.C
	}
	why := given
	i := 0
	select {
	case i = <-p.slots:
		p.began[i] = sock.Mono()
	case <-ctx.Done():
		why = gone
	case <-p.closed:
		why = drained
	case <-p.cut:
		why = drained
	case <-bound:
		why = waitedOut
	}
	p.waiting.Add(-1)
	p.waited.Add(1)
	p.waitNs.Add(int64(time.Since(start)))
	switch why {
	case drained:
		p.cutOff.Add(1)
	case waitedOut:
		p.timedOut.Add(1)
	}
	return i, why
}

// cutoff makes every request waiting for a slot, and every one after that
// finds none free, give up: answered 503 rather than cut unanswered when
// the drain's bound ends the process.
func (p *pool) cutoff() { p.cutOne.Do(func() { close(p.cut) }) }

func (p *pool) release(i int) {
	d := sock.Mono() - p.began[i]
	p.heldNs.Add(d)
	// The longest recent hold, decaying by a sixteenth a request: one slow
	// request long ago does not count for ever.
	for {
		old := p.longest.Load()
		next := max(d, old-old/16)
		if p.longest.CompareAndSwap(old, next) {
			break
		}
	}
	p.slots <- i
}

// shutdown refuses new requests and waits for the running ones to leave
// their threads, or for ctx to end; its error then names the threads still
// running.
func (p *pool) shutdown(ctx context.Context) error {
	first := false
	p.once.Do(func() { first = true; close(p.closed) })
	if !first {
		return ErrClosed
	}
	free := make([]bool, p.n)
	for left := p.n; left > 0; left-- {
		select {
		case i := <-p.slots:
			free[i] = true
			continue
		default:
		}
		select {
		case i := <-p.slots:
			free[i] = true
		case <-ctx.Done():
			// Take every slot freed meanwhile before naming the rest.
			for more := true; more; {
				select {
				case i := <-p.slots:
					free[i] = true
				default:
					more = false
				}
			}
			var busy []string
			for i, f := range free {
				if !f {
					busy = append(busy, fmt.Sprintf("python-%d", i+1))
				}
			}
			if len(busy) == 0 {
				return nil
			}
			return fmt.Errorf("wsgi: %s still running a request", strings.Join(busy, ", "))
		}
	}
	return nil
}

// watched is a request running the application on a pool thread under a
// timeout.
type watched struct {
	mu           sync.Mutex
	t            cpython.Thread // the thread running it
	own          bool           // t is this goroutine's, locked by watchStart
	method, path string
	began        time.Time
	done         bool // its response has begun, or it failed: not to be interrupted
	timedOut     bool // interrupted for its timeout
}

// watchdog looks at every slot a few times per timeout until the pool
// shuts down.
func (p *pool) watchdog(d time.Duration) {
	every := min(max(d/4, 50*time.Millisecond), time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	stuck := false
	for {
		select {
		case <-p.closed:
			return
		case <-tick.C:
		}
		over := 0
		for i := range p.watch {
			w := p.watch[i].Load()
			if w == nil || time.Since(w.began) < d {
				continue
			}
			over++
			w.mu.Lock()
			if !w.done && !w.timedOut {
				w.timedOut = true
				header := fmt.Sprintf("m0serve: wsgi: python-%d has run %s %s for %s, past the timeout of %s (--timeout): "+
					"it is interrupted and answered 504; every Python thread's stack follows, its own as thread %#016x\n",
					i+1, w.method, w.path, time.Since(w.began).Round(100*time.Millisecond), d, w.t.Ident())
				w.t.TimedOut(header)
			}
			w.mu.Unlock()
		}
		all := over == p.n
		if all && !stuck && p.stuck != nil {
			p.stuck()
		}
		stuck = all
	}
}

// watchStart records, under a timeout, the request taking slot on t (a
// subinterpreter's, from Reserve) or, with t zero, this goroutine's
// thread; watchEnd says its response has begun, and whether it was
// interrupted for its timeout.
func (p *pool) watchStart(slot int, method, path string, t cpython.Thread) *watched {
	own := t.Zero()
	if own {
		t = cpython.Here()
	}
	w := &watched{t: t, own: own, method: method, path: path, began: time.Now()}
	p.watch[slot].Store(w)
	return w
}

func (p *pool) watchEnd(slot int, w *watched) bool {
	if w == nil {
		return false
	}
	p.watch[slot].Store(nil)
	w.mu.Lock()
	w.done = true
	timedOut := w.timedOut
	w.mu.Unlock()
	if w.own {
		w.t.Release()
	}
	return timedOut
}
