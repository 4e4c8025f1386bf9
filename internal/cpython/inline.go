package cpython

/*
#include "m0py.h"
*/
import "C"

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// The inline front end's side of an executor (M0_INVERTED): a front end
// that runs on the loop's thread, called by the loop (Inline), starting
// requests and taking their answers by a call rather than through the
// queues' eventfds and Go's goroutines. The executor serves requests
// handed to it the usual way (Start, from any goroutine) beside it.

const aConn = C.M0_A_CONN

// LazyStarts is how many requests a batch starts at most where tasks
// start lazily (before 3.12, !Eager): past it, Python's cyclic collector
// runs inside the batch and finds them all alive (m0py.h). The rest wait,
// in order, for a later turn, behind the first steps of those started.
const LazyStarts = C.M0_LAZY_STARTS

// inlines are the executors with an inline front end, by id.
var inlines sync.Map

// go_asgi_inline is the loop's call into its inline front end: the loop's
// thread, with the GIL.
//
//export go_asgi_inline
func go_asgi_inline(id, op, fd C.int) {
	v, ok := inlines.Load(int32(id))
	if !ok {
		return
	}
	e := v.(*Executor)
	now := e.rescheduled(time.Now())
	in := e.inline
	// The reads, writes and answers are timed (Network); not the calls
	// that take connections over, tick or drain, once a connection or a
	// few times a second, nor those that start requests.
	switch op {
	case C.M0_I_ADOPT:
		in.Adopt(int(fd))
		return
	case C.M0_I_READ:
		in.Readable(int(fd))
	case C.M0_I_WRITE:
		in.Writable(int(fd))
	case C.M0_I_BATCH:
		in.Batch()
		return // it starts requests: the loop's tasks, which the default's requests cost it too
	case C.M0_I_ANSWERS:
		in.Answers()
	}
	e.network.Add(int64(time.Since(now)))
}

// rescheduled passes the loop's goroutine through Go's scheduler once
// every few milliseconds (the loop's thread, in a call into Go). It never
// passes there otherwise: it runs in one cgo call for life, and calls
// into Go return to it without being scheduled, so its P's schedule
// count stays where it was. The runtime's monitor takes that for one
// goroutine running past its 10 ms slice, and from then on takes the P
// back on every tick of 20 µs, starting a thread to look for work each
// time (measured: a fifth of the process's time at one connection on
// one CPU). The yield costs two thread switches; once every 5 ms it is
// nothing. It returns the time now: after the yield, when it yielded.
func (e *Executor) rescheduled(now time.Time) time.Time {
	if now.Sub(e.schedAt) > reschedule {
		e.schedAt = now
		runtime.Gosched()
		return time.Now()
	}
	return now
}

// reschedule is how often rescheduled yields: within the monitor's 10 ms.
const reschedule = 5 * time.Millisecond

// Network is the time the loop's thread has spent in the inline front
// end's calls that read, parse and write its connections' requests and
// answers (not those that start requests: the task the loop makes for
// each, which a request the default front end reads costs the loop as
// well): with LoopCPU, the share of the loop's thread that is the
// network's, which a shed moves off it. Wall time, read on the loop's
// thread with the monotonic clock (a call the thread is preempted in
// counts whole); any goroutine may call it.
func (e *Executor) Network() time.Duration { return time.Duration(e.network.Load()) }

// Adopt posts a connection's descriptor to the loop, whose inline front
// end's Adopt takes it over. Any goroutine.
func (e *Executor) Adopt(fd int) { e.post(aConn, math.MaxUint32, 0, fd, nil) }

// StartNow starts an HTTP request (its packed scope with its whole body)
// at once, its Tag set to tag; its answers come to TakeNow's fn. last says
// that no request follows it in the caller's batch: what its eager step
// (3.12+) sends while it is alone is then taken at once, by a call into
// the inline front end's Answers inside this one, rather than by the
// caller after the batch. The inline front end, on the loop's thread.
func (e *Executor) StartNow(scope []byte, tag any, last bool) *Request {
	r, _ := e.add(true)
	r.Tag = tag
	var p *C.char
	if len(scope) > 0 {
		p = (*C.char)(unsafe.Pointer(&scope[0]))
	}
	l := C.int(0)
	if last {
		l = 1
	}
	C.m0_asgi_start_now(e.id, AHTTP, C.uint32_t(r.slot), C.uint32_t(r.gen), 0, p, C.size_t(len(scope)), l)
	return r
}

// TakeNow takes every message the loop has queued for the requests
// StartNow started (the loop keeps them apart: the others go to the
// collector) and hands each to fn, whose m.Data is valid only during the
// call. The inline front end, on the loop's thread.
func (e *Executor) TakeNow(fn func(r *Request, m Msg)) {
	var v *C.m0_amsg
	n := int(C.m0_asgi_take_now(e.id, &v))
	eachMsg(v, n, func(kind int, slot, gen uint32, flags int, data []byte) {
		r := e.request(slot, gen)
		if r == nil {
			return
		}
		fn(r, Msg{Kind: kind, Flags: flags, Data: data})
		if kind == CDone {
			e.ended1()
			r.release()
		}
	})
}

// Watch has the loop watch fd for reading, writing, both or neither; the
// inline front end, on the loop's thread.
func (e *Executor) Watch(fd int, read, write bool) error {
	var what C.int
	if read {
		what |= C.M0_W_READ
	}
	if write {
		what |= C.M0_W_WRITE
	}
	if C.m0_asgi_watch(e.id, C.int(fd), what) != 0 {
		return errors.New("cpython: the loop refused to watch a descriptor")
	}
	return nil
}

// Later has the loop call the front end's Batch once it has run the
// callbacks of this turn; the inline front end, on the loop's thread.
func (e *Executor) Later() error {
	if C.m0_asgi_later(e.id) != 0 {
		return errors.New("cpython: the loop refused a callback")
	}
	return nil
}
