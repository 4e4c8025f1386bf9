package cpython

/*
#include <stdlib.h>
#include "m0py.h"
*/
import "C"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"

	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Message kinds, Go to the loop.
const (
	AHTTP       = C.M0_A_HTTP
	AWebSocket  = C.M0_A_WS
	ABody       = C.M0_A_BODY
	ADisconnect = C.M0_A_DISCONNECT
	AResume     = C.M0_A_RESUME
	AFrame      = C.M0_A_WSMSG
	aDrain      = C.M0_A_DRAIN
	aShutdown   = C.M0_A_SHUTDOWN
	aStop       = C.M0_A_STOP
)

// Message kinds, the loop to Go.
const (
	CStart    = C.M0_C_START
	CBody     = C.M0_C_BODY
	CWant     = C.M0_C_WANT
	CDone     = C.M0_C_DONE
	CAccept   = C.M0_C_WS_ACCEPT
	CFrame    = C.M0_C_WS_SEND
	CClose    = C.M0_C_WS_CLOSE
	CPathSend = C.M0_C_PATHSEND
	CIdle     = C.M0_C_IDLE
	cLoop     = C.M0_C_LOOP
	cLifespan = C.M0_C_LIFESPAN
)

// Message flags.
const (
	FlagMore = C.M0_A_MORE // more body follows
	FlagText = C.M0_A_TEXT // a WebSocket text frame
	FlagWait = C.M0_A_WAIT // the application's send waits for Resume
)

// CDone's flags.
const (
	DoneFailed = C.M0_DONE_FAILED // the response did not complete
	DoneQuiet  = C.M0_DONE_QUIET  // the client had left, or the server drains
)

// ScopeHTTP11 marks an HTTP/1.1 request in a packed scope's flags.
const ScopeHTTP11 = C.M0_S_HTTP11

// Lifespan outcomes.
const (
	LifespanStarted     = C.M0_L_STARTED
	LifespanFailed      = C.M0_L_FAILED
	LifespanUnsupported = C.M0_L_UNSUPPORTED
	LifespanStopped     = C.M0_L_STOPPED
	LifespanStopFailed  = C.M0_L_STOP_FAILED
)

// Msg is one message of a request from the application: Kind is a C*
// constant; Data is Go's own copy.
type Msg struct {
	Kind  int
	Flags int
	Data  []byte
}

// LoopOptions configure an executor.
type LoopOptions struct {
	// Loop is "auto" (uvloop when installed), "uvloop" or "asyncio".
	Loop string
	// Lifespan runs the application's lifespan protocol.
	Lifespan bool
	// Inline, when set, runs a front end on the loop's own thread
	// (M0_INVERTED): see Inline.
	Inline Inline
}

// Inline is a front end that runs on the loop's thread, called with the
// GIL held (the loop's callbacks): it must never block. Attach gives it
// its executor, before the loop starts (StartASGI's goroutine). Adopt is a
// connection posted with Executor.Adopt; Readable and Writable a
// descriptor it watches (Executor.Watch); Batch the end of a turn it asked
// for (Executor.Later); Answers that the loop has queued messages for its
// requests, which it takes with Executor.TakeNow.
type Inline interface {
	Attach(e *Executor)
	Adopt(fd int)
	Readable(fd int)
	Writable(fd int)
	Batch()
	Answers()
}

// Executor runs an ASGI application on one asyncio loop, on a Python
// thread of its own. A process may run several, each with its own loop.
type Executor struct {
	// Loop is the loop that resolved: "uvloop" or "asyncio".
	Loop string
	// Eager reports whether requests start as eager tasks (3.12+).
	Eager bool

	id       C.int
	inRing   *C.m0_ring // the inbound ring, written under inMu
	inMu     sync.Mutex
	outRing  *C.m0_ring // the outbound ring, read by the collector
	kickFD   int        // Go's own descriptor of the loop's eventfd, under kickMu; -1 once closed
	kickMu   sync.RWMutex
	kick     chan struct{} // a wake-up of the loop is owed (see post)
	out      *os.File      // the loop's wake-ups of the collector, read
	outW     *os.File      // and written by the sweeper: out itself but on macOS
	mu       sync.Mutex
	reqs     []*Request
	gens     []uint32
	free     []uint32
	lifespan chan Outcome  // the shutdown's outcome
	started  chan struct{} // closed once the startup's outcome is in start
	start    Outcome
	ended    chan struct{} // closed once the loop has stopped and all it sent is delivered
	stopped  chan struct{} // closed when the loop's thread has returned, endErr set
	endErr   error
	live     int           // requests whose task has not ended; under mu
	load     atomic.Int32  // live, for Load to read without mu
	busy     chan struct{} // the sweeper's word that live rose from 0
	idle     chan struct{} // closed when live falls to 0, for Wait
	inline   Inline        // the front end on the loop's thread, or nil
	schedAt  time.Time     // the inline front end's last yield (rescheduled); the loop's thread
	ready    chan struct{} // closed once the loop runs
	clock    atomic.Int32  // the loop thread's CPU-time clock while it runs; 0: none
	network  atomic.Int64  // nanoseconds in the inline front end's network calls, for Network
}

// Outcome is how a lifespan phase ended.
type Outcome struct {
	Code int
	Msg  string
}

// StartASGI starts a loop on a thread of its own with app, in the main
// interpreter, and returns once the loop runs. The lifespan startup, if
// asked for, runs from there: Startup waits for it.
func (rt *Runtime) StartASGI(app *App, opts LoopOptions) (*Executor, error) {
	return startASGI(app.obj, 0, opts)
}

// StartASGIInterpreters starts an executor in each subinterpreter
// StartInterpreters made, each running app imported there (held for the
// life of the process, as the main interpreter's is) on a loop of its own
// thread, and returns them once every loop runs: an interpreter's loop
// serves its requests under its own GIL, and the main interpreter runs
// none. The inline front end runs on the main interpreter's loop only.
func (rt *Runtime) StartASGIInterpreters(app *App, opts LoopOptions) ([]*Executor, error) {
	if opts.Inline != nil {
		return nil, errors.New("cpython: the inline front end runs on the main interpreter's loop, not in subinterpreters")
	}
	if len(rt.subs) == 0 {
		return nil, errors.New("cpython: no subinterpreters (StartInterpreters)")
	}
	apps, err := rt.loadSubs(app)
	if err != nil {
		return nil, err
	}
	exs := make([]*Executor, 0, len(rt.subs))
	for i, s := range rt.subs {
		e, err := startASGI(apps[i].app, s.k, opts)
		if err != nil {
			// The loops already running stop, their lifespan shut down
			// (the interpreters and the application objects stay, as
			// every interpreter's do).
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for _, e := range exs {
				e.Stop(ctx)
			}
			return nil, fmt.Errorf("in subinterpreter %d: %w", s.k, err)
		}
		exs = append(exs, e)
	}
	return exs, nil
}

// startASGI starts a loop for app, an object of interpreter k (0 the
// main one), on a thread of its own in that interpreter.
func startASGI(app Object, k int, opts LoopOptions) (*Executor, error) {
	var id, in, kick, out, outW C.int
	if C.m0_asgi_init(&id, &in, &kick, &out, &outW) != 0 {
		return nil, errors.New("cpython: cannot create an executor (its eventfds, its memory, or more than 256)")
	}
	e := &Executor{
		id:       id,
		inRing:   C.m0_asgi_ring(id, 0),
		outRing:  C.m0_asgi_ring(id, 1),
		kickFD:   int(kick),
		kick:     make(chan struct{}, 1),
		busy:     make(chan struct{}, 1),
		out:      os.NewFile(uintptr(out), "m0-asgi"),
		lifespan: make(chan Outcome, 4),
		started:  make(chan struct{}),
		ended:    make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	if opts.Loop == "" {
		opts.Loop = "auto"
	}
	if opts.Inline != nil {
		e.inline = opts.Inline
		e.inline.Attach(e)
		C.m0_asgi_inline(id)
		inlines.Store(int32(id), e)
	}
	// Requests start as eager tasks on 3.12+ under either front end. The
	// inline front end starts a turn's requests back to back and takes what
	// their eager steps sent after the last (StartNow), except that a last
	// one alone has its answer written as it is sent, before whatever
	// blocking call its view makes next.
	b, _ := json.Marshal(map[string]any{"loop": opts.Loop, "lifespan": opts.Lifespan})
	ready := make(chan struct{})
	e.ready = ready
	e.outW = e.out // one eventfd, read and written
	if outW != out {
		e.outW = os.NewFile(uintptr(outW), "m0-asgi-w") // a pipe's other end
	}
	go e.collect()
	go e.kicker()
	go e.sweep() // for the requests Go starts: the inline front end's answers are taken by a call, at once
	go func() {
		t, err := loopThread(k) // the loop's thread: its thread state, for life
		if err != nil {
			e.endErr = err
		} else {
			defer t.Release()
			if c, ok := threadClock(); ok {
				e.clock.Store(c)
				defer e.clock.Store(0)
			}
			o := C.CString(string(b))
			defer C.free(unsafe.Pointer(o))
			if C.m0_asgi_run(t.c, e.id, C.uintptr_t(app), o) != 0 {
				e.endErr = t.err()
			}
		}
		close(e.stopped)
		C.m0_asgi_close(e.id)
		e.kickMu.Lock() // no wake-up after the loop's end needs giving
		syscall.Close(e.kickFD)
		e.kickFD = -1
		e.kickMu.Unlock()
		e.out.Close() // the collector's Read returns: it takes what is left, then closes ended
		if e.outW != e.out {
			e.outW.Close()
		}
	}()
	select {
	case <-ready:
		return e, nil
	case <-e.ended:
		return nil, fmt.Errorf("cpython: the ASGI loop did not start: %w", e.endErr)
	}
}

// loopThread locks the calling goroutine to its OS thread and returns that
// thread's thread state in interpreter k; Release unlocks it. A
// subinterpreter's loop thread takes none of the places its requests on
// the WSGI path are counted by.
func loopThread(k int) (Thread, error) {
	if k == 0 {
		return Here(), nil
	}
	runtime.LockOSThread()
	c := C.m0_thread_in(C.int(k))
	if c == nil {
		runtime.UnlockOSThread()
		return Thread{}, fmt.Errorf("cpython: cannot create a thread state in subinterpreter %d", k)
	}
	return Thread{c: c}, nil
}

// Startup waits for the lifespan startup's outcome.
func (e *Executor) Startup(ctx context.Context) (Outcome, error) {
	select {
	case <-e.started:
		return e.start, nil
	case <-e.ended:
		return Outcome{}, fmt.Errorf("cpython: the ASGI loop ended: %v", e.endErr)
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	}
}

// Drain tells every request in flight that its client is gone: a
// streaming response ends.
func (e *Executor) Drain() { e.post(aDrain, math.MaxUint32, 0, 0, nil) }

// Wait waits until the task of every request started has ended (a
// WebSocket's, after its disconnect, included), or ctx ends.
func (e *Executor) Wait(ctx context.Context) error {
	e.mu.Lock()
	if e.live == 0 {
		e.mu.Unlock()
		return nil
	}
	if e.idle == nil {
		e.idle = make(chan struct{})
	}
	idle := e.idle
	n := e.live
	e.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-e.ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d requests of the application still running", n)
	}
}

// Stop runs the lifespan shutdown, if the startup completed, and stops the
// loop, within ctx. The outcome is the shutdown's.
func (e *Executor) Stop(ctx context.Context) (Outcome, error) {
	var o Outcome
	var err error
	lifespan := false
	select {
	case <-e.started:
		lifespan = e.start.Code == LifespanStarted
	default: // the startup has not answered: there is nothing to shut down
	}
	if lifespan {
		e.post(aShutdown, math.MaxUint32, 0, 0, nil)
		select {
		case o = <-e.lifespan:
		case <-ctx.Done():
			err = errors.New("the lifespan shutdown did not finish in time")
		case <-e.ended:
		}
	}
	e.post(aStop, math.MaxUint32, 0, 0, nil)
	select {
	case <-e.ended:
	case <-ctx.Done():
		if err == nil {
			err = errors.New("the ASGI loop did not stop in time")
		}
	}
	return o, err
}

// Load is the number of requests whose task has not ended, read without a
// lock: a handler with an executor in each interpreter starts a request on
// the least loaded.
func (e *Executor) Load() int { return int(e.load.Load()) }

// LoopCPU is the CPU time the loop's thread has used, while it runs (0
// before and after, and where a thread's CPU time is not read: Linux only).
// Any goroutine may call it.
func (e *Executor) LoopCPU() time.Duration {
	if c := e.clock.Load(); c != 0 {
		return clockTime(c)
	}
	return 0
}

// Ended is closed when the loop has stopped.
func (e *Executor) Ended() <-chan struct{} { return e.ended }

// post hands the loop a message. The first since the loop last took its
// queue owes it a wake-up, which the kicker gives once the goroutines that
// are ready to run have had their turn: under load they post too, and one
// wake-up (two thread switches on a busy core) carries all of it.
func (e *Executor) post(kind int, slot, gen uint32, flags int, data []byte) {
	if e.put(kind, slot, gen, flags, data) {
		select {
		case e.kick <- struct{}{}:
		default: // one is owed already
		}
	}
}

// postNow is post for a request that is the only one live: no other
// goroutine has anything to post with it, so the loop is woken at once,
// without the kicker's hand-off (a goroutine switch and a yield, on the
// path of every request at one connection).
func (e *Executor) postNow(kind int, slot, gen uint32, flags int, data []byte) {
	if e.put(kind, slot, gen, flags, data) {
		e.wake()
	}
}

// put writes a message to the inbound ring, or, when the ring has no room
// for it, to the queue behind it (a cgo call, m0_asgi_post). It reports
// whether the message owes the loop a wake-up. Neither path is a system
// call or, on the ring's, a cgo call: each of those wakes the runtime's
// monitor when the process was idle, which at one connection is every
// request (docs/profiles.md, "The runtime's monitor on one CPU").
func (e *Executor) put(kind int, slot, gen uint32, flags int, data []byte) bool {
	e.inMu.Lock()
	if atomic.LoadUint32(u32(&e.inRing.overflow)) != 0 || !ringPut(e.inRing, kind, slot, gen, flags, data) {
		var p *C.char
		if len(data) > 0 {
			p = (*C.char)(unsafe.Pointer(&data[0]))
		}
		atomic.AddUint64(u64(&e.inRing.spills), 1)
		// -1: the loop has ended, or no memory for the copy. The message is
		// lost then, as it was before the rings; overflow stays clear, so
		// what follows keeps its order.
		C.m0_asgi_post(e.id, C.int(kind), C.uint32_t(slot), C.uint32_t(gen), C.int(flags), p, C.size_t(len(data)))
	}
	e.inMu.Unlock()
	return atomic.SwapUint32(u32(&e.inRing.signaled), 1) == 0
}

// Spills counts the messages each way that went to the queue behind a
// ring rather than through it: data over a quarter of the ring, a full
// ring, or what followed either until the reader caught up. Small
// messages at a modest rate should never spill; the tests hold it to that.
func (e *Executor) Spills() (in, out uint64) {
	return atomic.LoadUint64(u64(&e.inRing.spills)), atomic.LoadUint64(u64(&e.outRing.spills))
}

// wake wakes the loop: a write to its eventfd, made as a raw system call
// (rawWrite) so that it wakes no monitor either.
func (e *Executor) wake() {
	one := [8]byte{1}
	e.kickMu.RLock()
	if e.kickFD >= 0 {
		rawWrite(e.kickFD, one[:]) // a full eventfd or pipe has its wake-up pending already
	}
	e.kickMu.RUnlock()
}

// kicker wakes the loop for the messages posted since it last woke it,
// until the loop ends.
func (e *Executor) kicker() {
	for {
		select {
		case <-e.kick:
			runtime.Gosched() // the goroutines ready to run post first
			e.wake()
		case <-e.ended:
			return
		}
	}
}

// sweepEvery is how often the sweeper looks for a wake-up the loop owes.
const sweepEvery = 5 * time.Millisecond

// sweep wakes the collector for messages the loop has queued and owes a
// wake-up for, when one is still owed, not given since, a tick of
// sweepEvery later. The loop gives it at the end of its turn (to_go's
// defer_wake), so that one wake-up carries every answer of the turn; an
// application step that holds the loop after sending (a blocking call or
// CPU-bound work in an async function, after its response's body) would
// otherwise hold the answer with it. An answer so waits at most about two
// ticks; while the step holds the loop the wake-up stays owed and each
// tick wakes the collector again, to find nothing more. The sweeper ticks
// only while requests are live.
func (e *Executor) sweep() {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	for {
		select {
		case <-e.busy:
		case <-e.ended:
			return
		}
		tick.Reset(sweepEvery)
		var last C.uint
		owed := false
		for {
			select {
			case <-tick.C:
			case <-e.ended:
				return
			}
			var n C.uint
			now := C.m0_asgi_owed(e.id, &n) != 0
			if now && owed && n == last {
				e.outW.Write(one) // the collector takes what is queued; a closed file is an error, and nothing
			}
			owed, last = now, n
			e.mu.Lock()
			live := e.live
			e.mu.Unlock()
			if live == 0 {
				tick.Stop()
				break
			}
		}
	}
}

// collect reads what the loop sends, in batches, and hands each message to
// its request. A wake-up is taken once, then the collector waits for the
// descriptor to be readable again, rather than reading it once more to
// find it empty (a system call a request at one connection, as os.File's
// Read makes): the loop writes after the take, which makes it readable
// anew. On Linux the wake-up is not read at all (readWakeups): Go's poller
// is edge-triggered and reports each write to the eventfd, read or not.
// Elsewhere a pipe's bytes are read first, or its writer would find it
// full; wake-ups a pipe still holds are spare, the batch having been
// taken.
func (e *Executor) collect() {
	var buf [64]byte
	rc, err := e.out.SyscallConn()
	if err == nil {
		rc.Read(func(fd uintptr) bool { // returns once the loop has stopped and out is closed
			for readWakeups {
				n, err := rawRead(int(fd), buf[:])
				switch {
				case err == syscall.EINTR:
					continue
				case err == syscall.EAGAIN:
					return false
				case err != nil || n == 0: // the descriptor failed, or a pipe's writer closed
					return true
				}
				break
			}
			e.takeAll(false)
			return false
		})
	}
	e.takeAll(true) // what is left
	<-e.stopped
	close(e.ended) // after every message of the loop was delivered
	// A request waiting for its next message waits on its own wake-up
	// alone (Next), not on ended with every other request: each hears
	// of the end by it.
	e.mu.Lock()
	for _, r := range e.reqs {
		if r != nil && r.wake != nil {
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
	e.mu.Unlock()
}

// takeAll hands every message the loop has queued to its request: the
// outbound ring's, then, when some went behind it (or last, once the loop
// has ended, whatever the queue holds), the ring's again and the queue's
// (m0py.h, "The rings").
func (e *Executor) takeAll(last bool) {
	atomic.StoreUint32(u32(&e.outRing.signaled), 0)
	ringTake(e.outRing, e.dispatch)
	if !last && atomic.LoadUint32(u32(&e.outRing.overflow)) == 0 {
		return
	}
	ringTake(e.outRing, e.dispatch)
	var v *C.m0_amsg
	n := int(C.m0_asgi_take(e.id, &v))
	eachMsg(v, n, func(kind int, slot, gen uint32, flags int, data []byte) {
		e.dispatch(kind, slot, gen, flags, bytes.Clone(data))
	})
}

// dispatch hands one message of the loop's to its request, or handles it
// when no request owns it.
func (e *Executor) dispatch(kind int, slot, gen uint32, flags int, data []byte) {
	if slot == math.MaxUint32 {
		e.control(kind, flags, data)
		return
	}
	e.deliver(slot, gen, Msg{Kind: kind, Flags: flags, Data: data})
}

// control handles a message of the loop's that no request owns.
func (e *Executor) control(kind, flags int, data []byte) {
	switch kind {
	case cLoop:
		e.Loop, e.Eager = string(data), flags != 0
		close(e.ready)
	case cLifespan:
		o := Outcome{Code: flags, Msg: string(data)}
		select {
		case <-e.started:
			e.lifespan <- o
		default: // the first outcome is the startup's
			e.start = o
			close(e.started)
		}
	}
}

// request is the live request of slot and gen, or nil: a message for a
// request that is over.
func (e *Executor) request(slot, gen uint32) *Request {
	e.mu.Lock()
	var r *Request
	if int(slot) < len(e.reqs) {
		r = e.reqs[slot]
	}
	e.mu.Unlock()
	if r == nil || r.gen != gen {
		return nil
	}
	return r
}

func (e *Executor) deliver(slot, gen uint32, m Msg) {
	r := e.request(slot, gen)
	if r == nil {
		return
	}
	if m.Kind == CDone {
		e.ended1()
	} else if r.closed.Load() {
		return // the handler is done with it
	}
	r.mu.Lock()
	if r.head > 0 && len(r.q) == cap(r.q) { // full: slide the unread down before growing
		n := copy(r.q, r.q[r.head:])
		clear(r.q[n:])
		r.q, r.head = r.q[:n], 0
	}
	r.q = append(r.q, m)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	if m.Kind == CDone {
		r.release()
	}
}

// ended1 counts a request's task over.
func (e *Executor) ended1() {
	e.mu.Lock()
	e.live--
	e.load.Add(-1)
	if e.live == 0 && e.idle != nil {
		close(e.idle)
		e.idle = nil
	}
	e.mu.Unlock()
}

// Request is one HTTP request or WebSocket in the loop.
type Request struct {
	e         *Executor
	slot, gen uint32
	mu        sync.Mutex
	q         []Msg // the messages from the application, read from q[head]
	head      int
	wake      chan struct{}
	refs      atomic.Int32 // the handler's and the task's
	closed    atomic.Bool  // the handler is done with it
	inline    bool         // its answers go to the inline front end (StartNow)
	// Tag is the inline front end's own, for its request.
	Tag any
}

// Start hands the loop a request: kind is AHTTP or AWebSocket, scope the
// packed scope (with the first body chunk), more whether body follows.
func (e *Executor) Start(kind int, scope []byte, more bool) *Request {
	r, alone := e.add(false)
	flags := 0
	if more {
		flags = FlagMore
	}
	if alone {
		e.postNow(kind, r.slot, r.gen, flags, scope)
	} else {
		e.post(kind, r.slot, r.gen, flags, scope)
	}
	return r
}

// add makes a request a slot, live; alone reports whether it is the only
// one live.
func (e *Executor) add(inline bool) (r *Request, alone bool) {
	e.mu.Lock()
	var slot uint32
	if n := len(e.free); n > 0 {
		slot = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		slot = uint32(len(e.reqs))
		e.reqs = append(e.reqs, nil)
		e.gens = append(e.gens, 0)
	}
	e.gens[slot]++
	r = &Request{e: e, slot: slot, gen: e.gens[slot], inline: inline}
	if !inline {
		r.wake = make(chan struct{}, 1)
	}
	r.refs.Store(2)
	e.reqs[slot] = r
	e.live++
	e.load.Add(1)
	// The sweeper looks after the requests Go starts (not the inline
	// front end's): its word when the first is live, or with the inline
	// front end, when one is (live counts the inline front end's too).
	if !inline && (e.live == 1 || e.inline != nil) {
		select {
		case e.busy <- struct{}{}:
		default:
		}
	}
	alone = e.live == 1
	e.mu.Unlock()
	return r, alone
}

// Next returns the next message from the application, waiting for it
// unless ctx ends first. Once the loop has stopped it returns a failed
// CDone.
//
// It waits on the request's own wake-up (and ctx's Done, where there is
// one), not on the executor's end with every other request waiting: a
// channel a thousand requests wait on at once makes each wait and wake
// touch the others' waiters. The collector wakes every request once the
// loop has ended, and the end is looked for before each wait.
func (r *Request) Next(ctx context.Context) (Msg, error) {
	done := ctx.Done()
	for {
		r.mu.Lock()
		if r.head < len(r.q) {
			m := r.q[r.head]
			r.q[r.head] = Msg{}
			r.head++
			if r.head == len(r.q) { // all read: the array again, from its start
				r.q, r.head = r.q[:0], 0
			}
			r.mu.Unlock()
			return m, nil
		}
		r.mu.Unlock()
		select {
		case <-r.e.ended:
			r.mu.Lock()
			more := r.head < len(r.q)
			r.mu.Unlock()
			if more { // delivered before the end, as the end was seen
				continue
			}
			// No answer will come: the request failed, as one whose task
			// raised.
			return Msg{Kind: CDone, Flags: DoneFailed, Data: []byte("asgi: the event loop has stopped")}, nil
		default:
		}
		if done == nil {
			<-r.wake
			continue
		}
		select {
		case <-r.wake:
		case <-done:
			return Msg{}, ctx.Err()
		}
	}
}

// Post sends the application a message: ABody, ADisconnect, AResume or
// AFrame.
func (r *Request) Post(kind, flags int, data []byte) { r.e.post(kind, r.slot, r.gen, flags, data) }

// Done lets go of the request on the handler's side; its slot is reused
// once its task is over too.
func (r *Request) Done() {
	r.closed.Store(true)
	r.release()
}

func (r *Request) release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	e := r.e
	e.mu.Lock()
	e.reqs[r.slot] = nil
	e.free = append(e.free, r.slot)
	e.mu.Unlock()
}

// Buffered is an ASGI application wrapped as a WSGI callable for the
// buffered path (--blocking-threads N > 0): each request runs to its end on
// the pool thread that took it, on that thread's own event loop, with its
// body buffered both ways and its scope built from the WSGI environ. App is
// the wrapper, which the WSGI bridge serves.
type Buffered struct {
	App *App
	rt  *Runtime
}

// BufferedASGI wraps the ASGI application app for the buffered path.
func (rt *Runtime) BufferedASGI(app *App) (*Buffered, error) {
	var out *Buffered
	err := rt.Main(func(t Thread) error {
		obj, err := t.callHelper("_asgi_buffered", app.Spec)
		if err != nil {
			return err
		}
		id, err := t.AttrStr(obj, "id")
		if err != nil {
			t.DecRef(obj)
			return err
		}
		out = &Buffered{App: &App{Spec: app.Spec, Protocol: "wsgi", obj: obj, buffered: id}, rt: rt}
		return nil
	})
	return out, err
}

// Lifespan runs a lifespan phase ("startup" or "shutdown") of the wrapped
// application, on a loop of its own thread, and waits for its outcome.
// Once the wrapper serves from subinterpreters (NewWSGI imported it there)
// it runs in each of them, at once (and not in the main interpreter, which
// serves nothing): the first failure is the outcome, else the application's
// lifespan is unsupported if it is in every interpreter.
func (b *Buffered) Lifespan(phase string) (Outcome, error) {
	arg, _ := json.Marshal(map[string]string{"id": b.App.buffered, "phase": phase})
	one := func(t Thread) (Outcome, error) {
		s, err := t.CallHelperStr("_asgi_buffered_lifespan", string(arg))
		if err != nil {
			return Outcome{}, err
		}
		var r struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		}
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			return Outcome{}, err
		}
		return Outcome{Code: r.Code, Msg: r.Msg}, nil
	}
	if !b.App.inSubs {
		var o Outcome
		err := b.rt.Main(func(t Thread) error {
			var err error
			o, err = one(t)
			return err
		})
		return o, err
	}
	outs := make([]Outcome, len(b.rt.subs))
	err := b.rt.EachInterpreter(func(t Thread) error {
		var err error
		outs[t.c.interp-1], err = one(t)
		return err
	})
	if err != nil {
		return Outcome{}, err
	}
	return Combine(outs), nil
}

// Combine is the outcome of one lifespan phase run in several
// interpreters, each with the application: the first failure, else the
// last outcome that says the application supports the lifespan, else
// unsupported (every interpreter said so).
func Combine(outs []Outcome) Outcome {
	o := outs[0]
	for _, x := range outs[1:] {
		if o.Code == LifespanFailed || o.Code == LifespanStopFailed {
			break
		}
		if x.Code != LifespanUnsupported || o.Code == LifespanUnsupported {
			o = x
		}
	}
	return o
}
