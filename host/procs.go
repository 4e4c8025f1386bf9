package host

import (
	"os"
	"runtime"
	"time"

	"github.com/m0serve/m0/internal/front"
	"github.com/m0serve/m0/internal/proc"
	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/wsgi"
	"golang.org/x/sys/unix"
)

// narrowing runs Go's side of a process on one P while the application's
// Python, under one GIL, is the pace, and on the runtime's default P count
// otherwise (docs/running.md, "Go's side on one P"; the measurements
// behind it in docs/profiles.md, "Go's side on one P under one GIL" and
// "The ASGI loop's process on one P"). With more than one P, Go's
// scheduler spreads each request's work over threads and cores, the call
// into Python or the hand-off to the loop with it; with one P and nothing
// queued, the runtime's monitor takes the P of every long call into
// Python instead, which the WSGI pool makes and the ASGI loop does not.
//
// m0serve narrows only where the P count is one GIL's to decide: GOMAXPROCS
// unset, more than one P, a GIL build (a --threads above 1 needs a
// free-threaded one), no --interpreters, no held streams (--realtime or a
// producer: their fan-out is Go's own work), no --blocking-threads 0 (its
// dedicated thread's hand-offs lose on one P), and a pool or an ASGI loop
// to serve. The inverted loop on one usable CPU, or with a worker a CPU,
// sets its own P count; otherwise the same looks shed its connections
// (shedder) and narrow with it.
type narrowing struct {
	stop   chan struct{} // closed by Stop
	done   chan struct{} // closed when run has put the default back
	usable float64       // the CPUs the process may use: the runtime's default P count, within a CPU limit
	shares int           // the worker processes that share the idle CPUs (--workers)
}

// narrowEvery is how often narrowing looks at the process.
const narrowEvery = 100 * time.Millisecond

// narrowProcs starts narrowing for the process's loops, served by
// servers, or returns nil where m0serve leaves the P count to the runtime.
// A process with a pool is read by its pool's threads; one whose every
// application runs on an ASGI event loop, by the loops' threads.
func narrowProcs(c *Config, load *procLoad, servers []front.Server, held bool) *narrowing {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) < 2 || freeThreaded() ||
		c.Interpreters > 0 || held || c.BlockingThreads == 0 {
		return nil
	}
	var inline []*inlineServer
	for _, s := range servers {
		if is, ok := s.(*inlineServer); ok {
			if is.oneCPU || max(c.Workers, 1) >= runtime.NumCPU() {
				// One usable CPU, or a worker for each: no CPU is free
				// beside the loop for Go's side to take a shed.
				return nil
			}
			inline = append(inline, is)
		}
	}
	threads, loops := 0, 0
	load.pools(func(ps wsgi.PoolStats) { threads += ps.Threads })
	drainsOf(load, func(loopClock) { loops++ })
	if threads == 0 && loops == 0 {
		return nil
	}
	var idle *idleClock                      // read only for a shedder
	usable := float64(runtime.GOMAXPROCS(0)) // at least two: the runtime rounds a CPU limit up, to two at least
	if len(inline) > 0 {
		idle = newIdleClock()
		if q := cpuLimit(); q > 0 {
			usable = min(usable, q)
		}
	}
	measure := func(since int64) (r reading) {
		if threads > 0 {
			load.pools(func(ps wsgi.PoolStats) { r.python += ps.Held })
		} else {
			drainsOf(load, func(l loopClock) { r.python += l.LoopCPU(); r.network += l.LoopNetwork() })
		}
		for _, s := range servers {
			if q, ok := s.(interface{ Requesting(int64) int }); ok {
				r.conns += q.Requesting(since)
			}
		}
		r.cpu, r.idle = processCPU(), idle.read()
		return r
	}
	var d decider = &narrower{threads: threads, narrow: true}
	set := setProcs
	if len(inline) > 0 {
		d, set = &shedder{}, shedSet(inline)
	}
	n := &narrowing{stop: make(chan struct{}), done: make(chan struct{}), usable: usable, shares: max(c.Workers, 1)}
	go func() {
		t := time.NewTicker(narrowEvery)
		defer t.Stop()
		n.run(t.C, d, measure, set)
	}()
	return n
}

// shedSet is what a shedder's decision sets: whether the inline servers
// shed their connections, and Go's side on one P with it.
func shedSet(inline []*inlineServer) func(on bool) {
	return func(on bool) {
		for _, s := range inline {
			s.shed.Store(on)
		}
		setProcs(on)
	}
}

// decider is what a look asks: whether what it decides changes (look),
// and what it is (on).
type decider interface {
	look(f figures) bool
	on() bool
}

// figures are one look's, over the time since the look before.
type figures struct {
	cpu    float64 // the CPUs the process used
	python float64 // Python's threads busy: its pools' threads held, or its loops' threads running, a share of one
	conns  int     // the connections that began a request
	// With an inline front end: the CPUs its network calls took on the
	// loops' threads (reading, parsing, writing; wall time, which counts
	// the loop's thread preempted inside a call too), and the idle CPUs
	// this process may take (narrowing.free).
	network, free float64
}

// reading is what a look measures: the process's CPU time, Python's (the
// time its pools' threads were held, or its event loops' threads' CPU
// time), the inline front end's network calls' and the idle time of the
// CPUs the process may run on (-1: unknown), all in all since the
// process began, and the connections that began a request since the Mono
// reading measure is given.
type reading struct {
	cpu, python, network, idle time.Duration
	conns                      int
}

// run looks at each tick until Stop, on a goroutine of its own, which
// alone uses d. It sets d's decision at the start (a narrower starts
// narrow, as the process starts idle, so that a load that meets it has
// Python on one thread from its first request), at each change, and off
// when stopped.
func (n *narrowing) run(ticks <-chan time.Time, d decider, measure func(since int64) reading, set func(on bool)) {
	defer close(n.done)
	set(d.on())
	at := sock.Mono()
	was := measure(at)
	for {
		select {
		case <-n.stop:
			set(false)
			return
		case <-ticks:
		}
		now := sock.Mono()
		r := measure(at)
		span := float64(max(now-at, 1))
		f := figures{
			cpu:     float64(r.cpu-was.cpu) / span,
			python:  float64(r.python-was.python) / span,
			conns:   r.conns,
			network: float64(r.network-was.network) / span,
		}
		f.free = n.free(f.cpu, r.idle-was.idle, span, r.idle >= 0 && was.idle >= 0)
		if d.look(f) {
			set(d.on())
		}
		at, was = now, r
	}
}

// free is a look's idle CPUs for this process: those its affinity allows
// that were idle for the span (idled, when known), no more than it may use
// less what it used (cpu), shared with the other workers, which read the
// same idle CPUs.
func (n *narrowing) free(cpu float64, idled time.Duration, span float64, known bool) float64 {
	f := n.usable - cpu
	if known {
		f = min(f, float64(idled)/span)
	}
	return max(f, 0) / float64(max(n.shares, 1))
}

// setProcs puts Go's side on one P, or back on the runtime's default (which
// then follows the CPUs and a container's limit as the runtime does).
func setProcs(narrow bool) {
	if narrow {
		runtime.GOMAXPROCS(1)
	} else {
		runtime.SetDefaultGOMAXPROCS()
	}
}

// narrower decides, look by look, whether Go's side runs on one P.
//
// With a pool, it asks for one once the process uses busyCPU of a CPU or
// more, its pools' threads are held for pythonShare of the time or more,
// and more connections than threads brought requests; and for the
// default, once narrow, when the process uses less than quietCPU, its
// threads are held for less than half of pythonShare, or no more
// connections than threads brought requests.
//
// With no pool (every application on an ASGI event loop, whose calls from
// Go are short), it asks for one while the loops' threads are busy for
// loopPace of the time or more (Python is the pace), or for loopShare while
// at most fewConns connections bring requests (a WebSocket's message after
// an answer counts as one): the loop's hand-offs are then in every round
// trip, and one P makes them on one thread. Once narrow, loopPaceKept,
// half of loopShare and twice fewConns keep it: the WebSocket echo at 64
// connections, which loses on one P, keeps the loop busy about a quarter
// of the time, and the pace's margin stays above it. It asks for the
// default when more connections bring requests to loops less busy (Go's
// work, frames or files, is then the pace), when few do and the loops take
// almost no part (files and Go handlers alone, whose round trips the
// runtime's idle second P shortens), or when none does and the loops are
// not the pace. Python the application runs on threads of its own (a sync
// view in a thread pool) is not read.
//
// Between the two it stays as it is, and a look under idleCPU asks for
// nothing. A change is made once narrowAfter looks in a row ask for it.
type narrower struct {
	threads int  // the pools' Python threads; 0: the ASGI loops are Python
	narrow  bool // on one P now
	streak  streak
}

func (d *narrower) on() bool { return d.narrow }

// The thresholds: shares of a CPU, of a pool or a loop's thread,
// connections, and looks.
const (
	idleCPU      = 0.02
	quietCPU     = 0.6
	busyCPU      = 0.8
	pythonShare  = 0.5
	loopPace     = 0.5
	loopPaceKept = 0.4
	loopShare    = 0.1
	fewConns     = 4
	shedPace     = 0.8
	shedCost     = 6   // Go's side's CPU under a shed, for each of the inline network calls' (shedder)
	shedFree     = 0.1 // the least idle CPU a shed needs: /proc/stat's tick in a look
	narrowAfter  = 2
)

// look takes one look's share of a CPU used, of a pool thread held (or of
// the loops' threads busy), and the connections that brought requests,
// and reports whether the P count is to change (to narrow's new value).
func (d *narrower) look(f figures) bool {
	cpu, python, conns := f.cpu, f.python, f.conns
	queue := conns > d.threads
	want := d.narrow
	switch {
	case cpu < idleCPU:
	case d.threads == 0:
		pace, part, few := loopPace, loopShare, fewConns
		if d.narrow {
			pace, part, few = loopPaceKept, part/2, few*2
		}
		want = python >= pace || conns > 0 && conns <= few && python >= part
	case d.narrow:
		want = queue && cpu >= quietCPU && python >= pythonShare/2
	default:
		want = queue && cpu >= busyCPU && python >= pythonShare
	}
	return d.streak.settle(&d.narrow, want)
}

// streak counts the looks in a row that asked for a change.
type streak int

// settle takes one look's want for *now: it changes *now, and reports so,
// once narrowAfter looks in a row asked for the change.
func (s *streak) settle(now *bool, want bool) bool {
	if want == *now {
		*s = 0
		return false
	}
	if *s++; *s < narrowAfter {
		return false
	}
	*s, *now = 0, want
	return true
}

// shedder decides, look by look, whether the inverted loop sheds its
// connections to the fasthttp front end (asgi.InlineOptions.Shed), on more
// than one usable CPU, and with it runs Go's side on one P (narrowing).
// The inverted loop's one thread reads, parses and writes beside the
// application's Python: the fewest thread switches a round trip, the lead
// at one connection; once that thread is the pace with other CPUs idle,
// the default front end's goroutines parse and write beside it, as under
// the default, which leads there (docs/asgi.md, "The inverted loop").
//
// It sheds once the loop's thread is busy shedPace of the time or more
// while more than fewConns connections bring requests, and the CPUs idle
// beside the process can take Go's side of the network: shedCost times
// what the inline front end's reads, parses and writes take of the loop's
// thread now. The default front end's goroutines, poller and hand-offs
// cost that much more than the inline calls for the same requests
// (Starlette's JSON view at 64 connections on two cores: about 9 µs of
// Go's side a request under the shed, against 1.5 µs of inline calls).
// Both sides are this process's code on this machine, so the rule reads
// the same on a slower machine or interpreter; what it weighs is how
// heavy the application's Python is beside its network, and how much CPU
// is free. Where too little is (a hello world with wrk beside it on two
// cores: its network takes 0.13-0.15 of a CPU on the loop's thread, with
// 0.3-0.6 idle, where Starlette's takes 0.07-0.09 with 0.7), the one
// thread serves faster, and keeps its connections.
//
// It stops (new connections are served inline again; those handed off
// stay with their server) once the loop is busy less than loopPaceKept of
// the time, its Python alone now, or at most fewConns bring requests, or
// the process is idle: the next connections are the loop's again (a load
// that comes back is shed again within two looks), where one client's
// light requests, each under an idle look, would otherwise leave them
// Go's. A change takes narrowAfter looks in a row.
type shedder struct {
	shed   bool
	streak streak
}

func (d *shedder) on() bool { return d.shed }

func (d *shedder) look(f figures) bool {
	want := false
	switch {
	case f.cpu < idleCPU:
	case d.shed:
		want = f.python >= loopPaceKept && f.conns > fewConns
	default:
		// Go's side runs on one P while shedding: a CPU is the most it takes.
		want = f.python >= shedPace && f.conns > fewConns && f.free >= shedFree && min(f.free, 1) >= shedCost*f.network
	}
	return d.streak.settle(&d.shed, want)
}

// Stop puts the runtime's default back and ends the looks; nil does
// nothing.
func (n *narrowing) Stop() {
	if n == nil {
		return
	}
	close(n.stop)
	<-n.done
}

// processCPU is the CPU time the process has used, its own and the
// kernel's for it.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleClock reads the idle time of the CPUs the process may run on, from
// /proc/stat: each CPU its affinity allows (read once, newIdleClock), idle
// or waiting for I/O. Where it cannot (not Linux, or no line names those
// CPUs), and on nil, read gives -1.
type idleClock struct {
	cpus map[string]bool // "cpu3": the lines to add up
}

func (c *idleClock) read() time.Duration {
	if c == nil || len(c.cpus) == 0 {
		return -1
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	return c.sum(b)
}

// sum adds up the idle time of c's CPUs in stat, /proc/stat's text: -1
// when it names none of them.
func (c *idleClock) sum(stat []byte) time.Duration {
	var ticks int64
	found := false
	for name, t := range proc.CPUStat(stat) {
		if c.cpus[name] {
			ticks += t.Idle
			found = true
		}
	}
	if !found {
		return -1
	}
	return time.Duration(ticks) * (time.Second / proc.UserHZ)
}
