package host

import (
	"os"
	"runtime"
	"time"

	"github.com/m0serve/m0/internal/front"
	"github.com/m0serve/m0/wsgi"
	"golang.org/x/sys/unix"
)

// narrowing runs Go's side of a process on one P while its Python, under
// one GIL, is the pace of more connections than it has pool threads, and
// on the runtime's default (one P a usable CPU) otherwise.
//
// Under one GIL the application's Python runs one call at a time, so when
// more connections than pool threads keep the process busy its pace is
// Python's, and Go's side needs no more than one P. With more, the runtime
// spreads each request's work (the network and the call into Python alike)
// over several threads and cores: measured on two cores, the Flask view at
// 64 connections ran on five threads at 3.1 thread switches a request, and
// on one P on one thread at 0.5, at 0.61-0.64x the CPU a request and
// 1.31-1.38x the rate (docs/running.md, "Go's side on one P"). At one
// connection one P loses (0.88-0.90x): with no other P idle, the runtime's
// monitor takes the P of every call into Python and starts a thread to
// look for other work, which an idle second P spares.
//
// m0serve narrows only where it decides the P count: GOMAXPROCS unset,
// more than one P, a pool whose threads share one GIL (not a free-threaded
// build, no --interpreters), and no --realtime (the held streams' fan-out
// is Go's own work), inverted loop (which sets its own) or one dedicated
// Python thread (--blocking-threads 0, whose hand-offs lost on one P:
// 0.92x).
type narrowing struct {
	stop chan struct{}
	done chan struct{}
}

// narrowEvery is how often narrowing looks at the process; narrowAfter is
// how many looks in a row decide a change.
const (
	narrowEvery = 100 * time.Millisecond
	narrowAfter = 2
)

// idleCPU and busyCPU are the shares of a CPU under which the process is
// idle (and nothing changes), and from which it is busy.
const (
	idleCPU = 0.02
	busyCPU = 0.75
)

// narrowProcs starts narrowing for the process's loops, served by
// servers, or returns nil where m0serve leaves the P count to the runtime.
func narrowProcs(c *Config, load *procLoad, servers []front.Server) *narrowing {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) < 2 || freeThreaded() ||
		c.Interpreters > 0 || c.Realtime || c.Threads > 1 || c.BlockingThreads == 0 {
		return nil
	}
	for _, l := range load.loops {
		if l.inline != nil {
			return nil
		}
	}
	threads := load.threads()
	if threads == 0 {
		return nil // no pool: every application runs on the ASGI loop
	}
	open := func() int {
		n := 0
		for _, s := range servers {
			if o, ok := s.(interface{ Open() int }); ok {
				n += o.Open()
			}
		}
		return n
	}
	n := &narrowing{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		t := time.NewTicker(narrowEvery)
		defer t.Stop()
		n.run(t.C, &narrower{threads: threads, narrow: true}, open, processCPU)
	}()
	return n
}

// run looks every tick until Stop: the process starts narrow, as it
// starts idle, so that a load that meets it keeps Python on one thread
// from its first request.
func (n *narrowing) run(ticks <-chan time.Time, d *narrower, open func() int, cpu func() time.Duration) {
	defer close(n.done)
	setProcs(true)
	last := cpu()
	for {
		select {
		case <-n.stop:
			setProcs(false)
			return
		case <-ticks:
		}
		c := cpu()
		if d.look(float64(c-last)/float64(narrowEvery), open()) {
			setProcs(d.narrow)
		}
		last = c
	}
}

// setProcs puts Go's side on one P, or back on the runtime's default
// (which follows the CPUs and a container's limit from then on).
func setProcs(narrow bool) {
	if narrow {
		runtime.GOMAXPROCS(1)
	} else {
		runtime.SetDefaultGOMAXPROCS()
	}
}

// narrower decides, look by look, whether Go's side runs on one P: it asks
// for one when the process is busy (busyCPU) with more connections open
// than its pools have threads, and for the default when it is busy with
// fewer or with less of a CPU; an idle look (under idleCPU) asks for
// nothing. A change is made once narrowAfter looks in a row ask for it.
type narrower struct {
	threads int  // the pools' Python threads
	narrow  bool // on one P now
	streak  int  // looks in a row that asked for the other
}

// look takes one look's share of a CPU used and the connections open, and
// reports whether the P count is to change (to narrow's new value).
func (d *narrower) look(used float64, open int) bool {
	want := used >= busyCPU && open > d.threads
	if used < idleCPU || want == d.narrow {
		d.streak = 0
		return false
	}
	if d.streak++; d.streak < narrowAfter {
		return false
	}
	d.streak, d.narrow = 0, want
	return true
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

// threads is how many Python threads the process's pools have.
func (p *procLoad) threads() int {
	n := 0
	for _, l := range p.loops {
		for _, d := range l.Drain {
			if s, ok := d.(interface{ Stats() wsgi.PoolStats }); ok {
				n += s.Stats().Threads
			}
		}
	}
	return n
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
