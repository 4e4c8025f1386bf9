// Package prefork runs a server as several worker processes under a
// supervisor: each worker is a fresh exec of the same binary (never a
// fork of a process that has started Python), handed the listener, the
// shared page (event ids and loads) and the bus as inherited descriptors.
// The supervisor respawns a worker that dies, with backoff, gives up
// loudly on a crash loop, drains every worker within one bound, and can
// replace them all when the code changes (--reload).
package prefork

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EventKind is what a worker process tells its supervisor.
type EventKind int

const (
	// Ready: the worker serves.
	Ready EventKind = iota
	// Prepared: a worker started to replace another (a reload) has loaded
	// the application and waits for Go.
	Prepared
	// Failed: the worker could not start; Code is its exit code and Text
	// what it would have printed.
	Failed
	// Exited: the process ended (Status says how). It is a worker's last
	// event.
	Exited
	// Due: the worker asks to be replaced (it has served its
	// --max-requests); Text says why.
	Due
)

// Event is one report of a worker process.
type Event struct {
	Kind   EventKind
	Code   int
	Text   string
	Status string // for Exited: "exit status 1", "signal: killed"
	Reason string // for Due: as counted, one of ReplacementReasons
}

// Proc is a worker process as its supervisor drives it.
type Proc interface {
	Pid() int
	Signal(sig syscall.Signal) error
	// Go tells a prepared worker to serve.
	Go() error
}

// SpawnOptions say how a worker starts.
type SpawnOptions struct {
	// Prepare: load the application, report Prepared, and serve only on Go.
	Prepare bool
	// Replaced: the worker replaces one that died; it warms its journal
	// from a sibling before it serves.
	Replaced bool
}

// Spawner starts worker slot. Its events go to report, from any
// goroutine, Exited last.
type Spawner func(slot int, opts SpawnOptions, report func(Event)) (Proc, error)

// Supervisor keeps Workers worker processes serving. Workers (1 or more)
// and Spawn are required; every other field has a default for its zero
// value.
type Supervisor struct {
	Workers int
	Spawn   Spawner
	Stderr  io.Writer
	// Drain is the bound a worker drains within (SIGTERM); past it and
	// Grace the supervisor kills it and names it.
	Drain, Grace time.Duration
	// QuickDeath is how soon after it started a worker's death counts as
	// quick; after MaxQuickDeaths quick deaths in a row of one worker the
	// supervisor gives up.
	QuickDeath     time.Duration
	MaxQuickDeaths int
	// Reload, when it receives, replaces every worker: the new ones load
	// the application first, and when one cannot, the old ones serve on.
	Reload <-chan string
	// Exit, if set, is called as a worker's process ends, with its slot
	// and pid (Page.Release).
	Exit func(slot, pid int)
	// Stopping, if set, is called when stop receives, before the workers
	// are told: no worker is started after it.
	Stopping func()
	// Ready, if set, is called when every worker serves: once they all
	// have at first, and again after each reload, when the new workers
	// all serve or the change did not load and the old ones serve on.
	Ready func()
	// Reloading, if set, is called as a reload begins.
	Reloading func()
	// Replace, when it receives, replaces a worker, or with Slot -1 every
	// worker one at a time (SIGHUP): see Replacement.
	Replace <-chan Replacement
	// MaxRSS (bytes) and Lifetime, when above zero, replace a worker whose
	// resident memory passes MaxRSS, or that has served for Lifetime; both
	// are looked at every CheckEvery.
	MaxRSS   int64
	Lifetime time.Duration
	// RSS reads a process's resident memory in bytes; nil reads /proc.
	RSS func(pid int) (int64, error)
	// Slots is how many workers there may be at most: Scale adds one up to
	// it. Zero means Workers.
	Slots int
	// Scale, when it receives, adds a worker (+1, SIGTTIN) in the next
	// slot, or drains the last one (-1, SIGTTOU), as gunicorn does; never
	// fewer than one, nor more than Slots. A change waits for a
	// replacement or reload under way to end.
	Scale <-chan int
	// InUse, if set, is told as a slot begins to run a worker (SIGTTIN)
	// and once the last of them has gone (SIGTTOU): Page.SetInUse. The
	// first Workers slots are the caller's to mark.
	InUse func(slot int, on bool)
	// Hold, when it receives true, holds the replacements asked for (they
	// wait in order) until it receives false: a worker that dies is still
	// started again. A hand-over (SIGUSR2) holds them: the workers are
	// about to drain, and the new server's bridge is to the ones serving.
	Hold <-chan bool
	// Count, if set, is told of every replacement as it begins, and of
	// every worker started in place of one that died ("died"), with its
	// reason, one of ReplacementReasons (Page.CountReplacement).
	Count func(reason string)
}

// Replacement asks for a worker's replacement. The successor loads the
// application first; once it has, the worker drains (it stops taking
// connections, finishes its requests, and its held streams are told to
// reconnect), and the successor serves in its place as soon as it has
// exited. Connections that arrive meanwhile wait in the listen queue, or
// go to the other workers. Replacements happen one at a time, in the order
// asked; one asked for a worker already waiting for its own is dropped.
type Replacement struct {
	Slot   int    // the worker, or -1 for every one
	Why    string // said in the log line: "SIGHUP", "served 1000 requests"
	Reason string // counted as, one of ReplacementReasons ("sighup")
}

// CheckEvery is how often the supervisor looks at each worker's memory and
// age, for MaxRSS and Lifetime.
const CheckEvery = time.Second

// Defaults of a Supervisor's zero fields.
const (
	DefaultDrain          = 5 * time.Second
	DefaultGrace          = time.Second
	DefaultQuickDeath     = 10 * time.Second
	DefaultMaxQuickDeaths = 5
	firstBackoff          = 100 * time.Millisecond
	maxBackoff            = 5 * time.Second
)

// worker is one process the supervisor started.
type worker struct {
	slot     int
	p        Proc
	started  time.Time
	ready    bool
	prepared bool
	retired  bool // being drained: its exit is not replaced
	added    bool // started by SIGTTIN
	exited   bool
	failure  *Event
}

type procEvent struct {
	w *worker
	Event
}

// replacing is a replacement under way: the successor of old in slot.
type replacing struct {
	slot     int
	old, new *worker
	why      string
	done     string // once it is over: "served", "kept" or "respawn"
}

// Run starts the workers and keeps them serving until stop receives; it
// then drains them and returns 0. It returns early, with an exit code,
// when a worker cannot start at first (its code, its message printed
// once) or a worker dies too often (1).
func (s *Supervisor) Run(stop <-chan os.Signal) int {
	s.defaults()
	ev := make(chan procEvent, 64)
	respawn := make(chan int, s.Slots)
	cur := make([]*worker, s.Workers)
	quick := make([]int, s.Slots) // quick deaths in a row, per slot
	var leaving []*worker         // drained by SIGTTOU
	scale := 0                    // SIGTTIN (+) and SIGTTOU (-) not applied yet
	var next []*worker            // a reload's workers
	var retiring []*worker        // the workers a reload replaces
	starting, reloadAgain := true, false
	var reloadWhat string
	var queue []Replacement // replacements asked for, in order
	held := false           // Hold's
	var repl *replacing     // the one under way
	everyone := func() []*worker {
		ws := append(append(append(append([]*worker{}, cur...), next...), retiring...), leaving...)
		if repl != nil {
			ws = append(ws, repl.new)
			if repl.old != cur[repl.slot] {
				ws = append(ws, repl.old)
			}
		}
		return ws
	}
	enqueue := func(r Replacement) {
		for _, q := range queue {
			if q.Slot == r.Slot {
				return
			}
		}
		if repl != nil && repl.slot == r.Slot {
			return
		}
		queue = append(queue, r)
	}
	var check <-chan time.Time
	if s.MaxRSS > 0 || s.Lifetime > 0 {
		t := time.NewTicker(CheckEvery)
		defer t.Stop()
		check = t.C
	}
	lastFailure := make([]string, s.Slots) // per slot, the text printed last

	for i := range cur {
		w, err := s.start(i, SpawnOptions{}, ev)
		if err != nil {
			fmt.Fprintf(s.Stderr, "m0serve: cannot start worker %d: %v\n", i, err)
			s.stopAll(ev, cur)
			return 1
		}
		cur[i] = w
	}
	announce := true // Ready is owed, once every worker serves
	for {
		if reloadAgain && repl == nil && !starting && next == nil && retiring == nil {
			reloadAgain = false
			next = s.reload(reloadWhat, len(cur), ev)
		}
	scaling:
		for scale != 0 && repl == nil && !starting && next == nil && retiring == nil {
			if scale > 0 {
				if slices.ContainsFunc(leaving, func(x *worker) bool { return x.slot == len(cur) }) {
					break scaling // the slot's last worker still drains: not two in one slot
				}
				scale--
				if len(cur) >= s.Slots {
					fmt.Fprintf(s.Stderr, "m0serve: SIGTTIN: %d workers already, the most this supervisor has room for (%d slots); restart with a larger --workers for more\n", len(cur), s.Slots)
					continue
				}
				slot := len(cur)
				s.inUse(slot, true)
				w, err := s.start(slot, SpawnOptions{Replaced: true}, ev)
				if err != nil {
					s.inUse(slot, false)
					fmt.Fprintf(s.Stderr, "m0serve: SIGTTIN: cannot start worker %d: %v\n", slot, err)
					continue
				}
				w.added = true
				cur = append(cur, w)
				quick[slot], lastFailure[slot] = 0, ""
				fmt.Fprintf(s.Stderr, "m0serve: SIGTTIN: worker %d (pid %d) added; %d workers\n", slot, w.p.Pid(), len(cur))
				continue
			}
			scale++
			if len(cur) <= 1 {
				fmt.Fprintf(s.Stderr, "m0serve: SIGTTOU: one worker left, which serves on\n")
				continue
			}
			last := len(cur) - 1
			w := cur[last]
			cur = cur[:last]
			queue = slices.DeleteFunc(queue, func(r Replacement) bool { return r.Slot >= len(cur) })
			if w == nil { // dead, waiting to be started again: it is not
				s.inUse(last, false)
				fmt.Fprintf(s.Stderr, "m0serve: SIGTTOU: worker %d (not running) removed; %d workers\n", last, len(cur))
				continue
			}
			leaving = append(leaving, retire([]*worker{w})...)
			fmt.Fprintf(s.Stderr, "m0serve: SIGTTOU: worker %d (pid %d) drains; %d workers\n", last, w.p.Pid(), len(cur))
		}
		if repl == nil && !starting && next == nil && retiring == nil && !held && len(queue) > 0 {
			r := queue[0]
			queue = queue[1:]
			if r.Slot >= len(cur) {
				continue // its worker was drained by SIGTTOU since
			}
			if old := cur[r.Slot]; old != nil && old.ready && !old.retired {
				fmt.Fprintf(s.Stderr, "m0serve: replacing worker %d (pid %d): %s\n", r.Slot, old.p.Pid(), r.Why)
				s.count(r.Reason)
				w, err := s.start(r.Slot, SpawnOptions{Prepare: true, Replaced: true}, ev)
				if err != nil {
					fmt.Fprintf(s.Stderr, "m0serve: cannot start worker %d's replacement: %v; it serves on\n", r.Slot, err)
				} else {
					repl = &replacing{slot: r.Slot, old: old, new: w, why: r.Why}
				}
			}
		}
		if announce && repl == nil && !starting && next == nil && retiring == nil && all(cur, func(w *worker) bool { return w != nil && w.ready }) {
			announce = false
			if s.Ready != nil {
				s.Ready()
			}
		}
		select {
		case <-stop:
			if s.Stopping != nil {
				s.Stopping()
			}
			s.stopAll(ev, everyone())
			return 0
		case d := <-s.Scale:
			scale += d
		case held = <-s.Hold:
		case r := <-s.Replace:
			if r.Slot < 0 {
				for i := range cur {
					enqueue(Replacement{Slot: i, Why: r.Why, Reason: r.Reason})
				}
			} else if r.Slot < len(cur) {
				enqueue(r)
			}
		case <-check:
			for i, w := range cur {
				if w == nil || !w.ready || w.retired {
					continue
				}
				if s.Lifetime > 0 && time.Since(w.started) >= s.Lifetime {
					enqueue(Replacement{Slot: i, Why: fmt.Sprintf("it has served for %s (--workers-lifetime)", s.Lifetime), Reason: "lifetime"})
				} else if s.MaxRSS > 0 {
					if rss, err := s.rss(w.p.Pid()); err == nil && rss > s.MaxRSS {
						enqueue(Replacement{Slot: i, Why: fmt.Sprintf("its memory is %d MiB, over %d MiB (--workers-max-rss)", rss>>20, s.MaxRSS>>20), Reason: "max-rss"})
					}
				}
			}
		case what := <-s.Reload:
			if s.Reloading != nil {
				s.Reloading()
			}
			announce = true
			if next != nil {
				// Still loading the last change (stuck at import, say):
				// it is called off for this one.
				retire(next)
				next = s.reload(what, len(cur), ev)
				continue
			}
			if starting || retiring != nil || repl != nil {
				reloadAgain, reloadWhat = true, what
				continue
			}
			next = s.reload(what, len(cur), ev)
		case i := <-respawn:
			if i < len(cur) && cur[i] == nil {
				w, err := s.start(i, SpawnOptions{Replaced: true}, ev)
				if err != nil {
					fmt.Fprintf(s.Stderr, "m0serve: cannot start worker %d: %v; giving up\n", i, err)
					s.stopAll(ev, everyone())
					return 1
				}
				cur[i] = w
			}
		case e := <-ev:
			w := e.w
			if repl != nil && (w == repl.new || w == repl.old) && s.replaced(repl, e, cur, ev) {
				if e.Kind == Exited && s.Exit != nil {
					s.Exit(w.slot, w.p.Pid())
				}
				if done := repl.done; done != "" {
					switch done {
					case "served": // the successor serves
					case "respawn": // neither serves: as a death
						cur[repl.slot] = nil
						slot := repl.slot
						time.AfterFunc(firstBackoff, func() { respawn <- slot })
					}
					repl = nil
				}
				continue
			}
			switch e.Kind {
			case Due:
				if w.slot < len(cur) && cur[w.slot] == w && !w.retired {
					enqueue(Replacement{Slot: w.slot, Why: e.Text, Reason: e.Reason})
				}
			case Ready:
				w.ready = true
				if starting && all(cur, func(w *worker) bool { return w != nil && w.ready }) {
					starting = false
					if reloadAgain {
						reloadAgain = false
						next = s.reload(reloadWhat, len(cur), ev)
					}
				}
			case Prepared:
				w.prepared = true
				if next != nil && all(next, func(w *worker) bool { return w.prepared }) {
					// Every new worker has loaded the change: the old
					// ones drain, and the new serve once they are gone.
					retiring = retire(cur)
					cur, next = next, nil
					if len(retiring) == 0 {
						s.goAll(cur)
					}
				}
			case Failed:
				w.failure = &e.Event
				// A replacement that cannot start, or a worker that served
				// and then failed: said once per text, not per attempt.
				if (!starting || w.ready) && !w.retired && !inReload(w, next) && e.Text != lastFailure[w.slot] {
					io.WriteString(s.Stderr, e.Text)
					lastFailure[w.slot] = e.Text
				}
			case Exited:
				w.exited = true
				if s.Exit != nil {
					s.Exit(w.slot, w.p.Pid())
				}
				switch {
				case w.retired && slices.Contains(leaving, w):
					leaving = slices.DeleteFunc(leaving, func(x *worker) bool { return x == w })
					if w.slot >= len(cur) {
						s.inUse(w.slot, false)
					}
				case w.retired:
					if retiring != nil && all(retiring, func(w *worker) bool { return w.exited }) {
						retiring = nil
						s.goAll(cur)
						if reloadAgain {
							reloadAgain = false
							next = s.reload(reloadWhat, len(cur), ev)
						}
					}
				case inReload(w, next):
					s.say(w, e.Event, "the change did not load; the previous workers serve on")
					retire(next)
					next = nil
				case starting && !w.ready:
					code := s.say(w, e.Event, "")
					s.stopAll(ev, everyone())
					return code
				case w.added && !w.ready && w.slot == len(cur)-1 && cur[w.slot] == w:
					// SIGTTIN's worker could not load the application:
					// it is not started again, and the others serve on.
					cur = cur[:w.slot]
					s.inUse(w.slot, false)
					fmt.Fprintf(s.Stderr, "m0serve: SIGTTIN: worker %d (pid %d) did not start (%s); %d workers\n",
						w.slot, w.p.Pid(), e.Status, len(cur))
				default:
					if w.slot >= len(cur) {
						break
					}
					cur[w.slot] = nil
					lived := time.Since(w.started)
					if lived >= s.QuickDeath {
						quick[w.slot] = 0
					} else {
						quick[w.slot]++
					}
					if quick[w.slot] >= s.MaxQuickDeaths {
						cause := e.Status
						if w.failure != nil {
							first, _, _ := strings.Cut(strings.TrimSpace(w.failure.Text), "\n")
							cause += ": " + strings.TrimPrefix(first, "m0serve: ")
						}
						fmt.Fprintf(s.Stderr, "m0serve: worker %d died %d times in a row within %s of starting (last: %s); giving up\n",
							w.slot, quick[w.slot], s.QuickDeath, cause)
						s.stopAll(ev, everyone())
						return 1
					}
					wait := time.Duration(0)
					if quick[w.slot] > 0 {
						wait = min(firstBackoff<<(quick[w.slot]-1), maxBackoff)
					}
					fmt.Fprintf(s.Stderr, "m0serve: worker %d (pid %d) %s; replacing it", w.slot, w.p.Pid(), e.Status)
					if wait > 0 {
						fmt.Fprintf(s.Stderr, " in %s", wait)
					}
					fmt.Fprintln(s.Stderr)
					s.count("died")
					slot := w.slot
					time.AfterFunc(wait, func() { respawn <- slot })
				}
			}
		}
	}
}

func (s *Supervisor) inUse(slot int, on bool) {
	if s.InUse != nil {
		s.InUse(slot, on)
	}
}

func (s *Supervisor) count(reason string) {
	if s.Count != nil {
		s.Count(reason)
	}
}

func (s *Supervisor) defaults() {
	if s.Drain <= 0 {
		s.Drain = DefaultDrain
	}
	if s.Slots < s.Workers {
		s.Slots = s.Workers
	}
	if s.Grace <= 0 {
		s.Grace = DefaultGrace
	}
	if s.QuickDeath <= 0 {
		s.QuickDeath = DefaultQuickDeath
	}
	if s.MaxQuickDeaths <= 0 {
		s.MaxQuickDeaths = DefaultMaxQuickDeaths
	}
	if s.Stderr == nil {
		s.Stderr = os.Stderr
	}
}

func (s *Supervisor) start(slot int, opts SpawnOptions, ev chan<- procEvent) (*worker, error) {
	w := &worker{slot: slot, started: time.Now()}
	p, err := s.Spawn(slot, opts, func(e Event) { ev <- procEvent{w, e} })
	if err != nil {
		return nil, err
	}
	w.p = p
	return w, nil
}

// reload starts a worker to replace each, prepared to serve on Go.
func (s *Supervisor) reload(what string, n int, ev chan<- procEvent) []*worker {
	if what != "" {
		fmt.Fprintf(s.Stderr, "m0serve: %s changed; reloading\n", what)
	}
	next := make([]*worker, n) // as many as serve now, SIGTTIN's and SIGTTOU's included
	for i := range next {
		w, err := s.start(i, SpawnOptions{Prepare: true}, ev)
		if err != nil {
			fmt.Fprintf(s.Stderr, "m0serve: cannot start worker %d: %v; the previous workers serve on\n", i, err)
			retire(next[:i])
			return nil
		}
		next[i] = w
	}
	return next
}

// say prints why a worker that did not start ended, once, and returns
// the exit code it asks for. why, if set, follows it.
func (s *Supervisor) say(w *worker, e Event, why string) int {
	code := 1
	if w.failure != nil {
		io.WriteString(s.Stderr, w.failure.Text)
		code = w.failure.Code
	} else {
		fmt.Fprintf(s.Stderr, "m0serve: worker %d (pid %d) %s during start-up\n", w.slot, w.p.Pid(), e.Status)
	}
	if why != "" {
		fmt.Fprintf(s.Stderr, "m0serve: %s\n", why)
	}
	return code
}

// retire tells the workers still running to drain, and returns them.
func retire(ws []*worker) []*worker {
	var out []*worker
	for _, w := range ws {
		if w != nil && !w.exited {
			w.retired = true
			w.p.Signal(syscall.SIGTERM)
			out = append(out, w)
		}
	}
	return out
}

func (s *Supervisor) goAll(ws []*worker) {
	for _, w := range ws {
		if w != nil && !w.exited {
			w.p.Go()
		}
	}
}

// stopAll drains the workers in parallel and waits for them within the
// drain bound and its grace; one still running then is named and killed.
func (s *Supervisor) stopAll(ev <-chan procEvent, ws []*worker) {
	alive := map[*worker]bool{}
	for _, w := range ws {
		if w != nil && !w.exited {
			alive[w] = true
			w.p.Signal(syscall.SIGTERM)
		}
	}
	bound := time.NewTimer(s.Drain + s.Grace)
	defer bound.Stop()
	killed := false
	for len(alive) > 0 {
		select {
		case e := <-ev:
			if e.Kind == Exited {
				e.w.exited = true
				if s.Exit != nil {
					s.Exit(e.w.slot, e.w.p.Pid())
				}
				delete(alive, e.w)
			}
		case <-bound.C:
			if killed {
				return // the kernel has them; nothing more to wait for
			}
			killed = true
			for w := range alive {
				fmt.Fprintf(s.Stderr, "m0serve: worker %d (pid %d) still draining after %s; killed\n", w.slot, w.p.Pid(), s.Drain)
				w.p.Signal(syscall.SIGKILL)
			}
			bound.Reset(s.Grace)
		}
	}
}

func all(ws []*worker, f func(*worker) bool) bool {
	for _, w := range ws {
		if !f(w) {
			return false
		}
	}
	return true
}

func inReload(w *worker, next []*worker) bool {
	for _, n := range next {
		if n == w {
			return true
		}
	}
	return false
}

// replaced handles an event of a replacement's worker, and reports whether
// it did; cur[slot] becomes the successor once the old worker has exited.
// When the replacement is over it sets r.done.
func (s *Supervisor) replaced(r *replacing, e procEvent, cur []*worker, ev chan<- procEvent) bool {
	w := e.w
	switch {
	case w == r.new && e.Kind == Prepared:
		w.prepared = true
		if r.old.exited {
			w.p.Go()
		} else {
			retire([]*worker{r.old}) // it drains; the successor serves once it is gone
		}
	case w == r.new && e.Kind == Ready:
		w.ready = true
		cur[r.slot] = w
		fmt.Fprintf(s.Stderr, "m0serve: worker %d replaced: pid %d serves in place of pid %d\n", r.slot, w.p.Pid(), r.old.p.Pid())
		r.done = "served"
	case w == r.new && e.Kind == Failed:
		w.failure = &e.Event
		io.WriteString(s.Stderr, e.Text)
	case w == r.new && e.Kind == Exited:
		w.exited = true
		if !r.old.retired && !r.old.exited {
			s.say(w, e.Event, fmt.Sprintf("worker %d's replacement did not start; worker %d (pid %d) serves on", r.slot, r.slot, r.old.p.Pid()))
			r.done = "kept"
		} else {
			fmt.Fprintf(s.Stderr, "m0serve: worker %d's replacement (pid %d) %s; starting another\n", r.slot, w.p.Pid(), e.Status)
			r.done = "respawn"
		}
	case w == r.old && e.Kind == Exited:
		w.exited = true
		if !w.retired {
			// It died while its successor loaded: the successor serves
			// as soon as it has.
			fmt.Fprintf(s.Stderr, "m0serve: worker %d (pid %d) %s while its replacement loaded\n", r.slot, w.p.Pid(), e.Status)
		}
		if r.new.prepared {
			r.new.p.Go()
		}
	case w == r.old && e.Kind == Due:
	case w == r.old && e.Kind == Failed:
		w.failure = &e.Event
	default:
		return false // the old worker's Ready, say: as any worker's
	}
	return true
}

// rss is the resident memory of process pid, in bytes.
func (s *Supervisor) rss(pid int) (int64, error) {
	if s.RSS != nil {
		return s.RSS(pid)
	}
	return ProcRSS(pid)
}

// ProcRSS reads process pid's resident memory from /proc/PID/statm.
func ProcRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("prefork: /proc/%d/statm: %q", pid, b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * int64(os.Getpagesize()), nil
}
