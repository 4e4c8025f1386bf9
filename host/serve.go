package host

import (
	"context"
	"errors"
	"fmt"
	"github.com/m0serve/m0/internal/bind"
	"github.com/m0serve/m0/internal/front"
	"github.com/m0serve/m0/internal/sdnotify"
	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/wire"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/m0serve/m0/prefork"
	"github.com/m0serve/m0/realtime"
	"github.com/m0serve/m0/realtime/pgbus"
)

// DrainTimeout bounds the whole drain: in-flight requests, the thread pool's
// join and the producers' join share it.
const DrainTimeout = 5 * time.Second

// CutoffMargin is how long before DrainTimeout the requests still waiting
// for a thread are answered 503 (Retry-After, Connection: close): time
// enough for those answers to be written before the process ends.
const CutoffMargin = 500 * time.Millisecond

// Shutdowner is a piece the drain stops after the listener: a thread pool, a
// producer, an interpreter flushing its output. Its error names what is
// still running when ctx ends.
type Shutdowner interface {
	Shutdown(ctx context.Context) error
}

// newHub returns the process's hub for a configuration, or nil when
// nothing needs one: under --realtime, or when want (the application has a
// producer). A worker's hub takes its ids from the shared page and shares
// its frames on the bus.
// Under --pg-listen (pg), PostgreSQL is both, across every instance.
func newHub(c *Config, want bool, w *prefork.Worker, pg *pgbus.Bus) *realtime.Hub {
	if !c.Realtime && !want {
		return nil
	}
	// The configuration spells each off as 0, the hub as a negative.
	opts := &realtime.Options{ReplayFrames: wire.Off(c.ReplayFrames), Heartbeat: wire.Off(c.SSEHeartbeat),
		KeepAlive: wire.Off(c.StreamKeepAlive)}
	switch {
	case pg != nil:
		opts.IDs, opts.Bus = pg, pg
	case w != nil:
		opts.IDs, opts.Bus = w.Page, w.Bus
	}
	return realtime.New(opts)
}

// run makes the application's loops, starts its producer, listens, prints
// the ready lines, serves until SIGTERM or SIGINT, and drains. It returns
// nil after a drain, however it ended: a drain that runs out of time names
// what was still running on stderr. plan is the one that passed. w is what
// the process inherited as a worker of a supervisor, or its own page and
// bus (prefork.Local), or nil.
func run(plan *Plan, app *adapted, w *prefork.Worker, stdout, stderr io.Writer) error {
	cfg := plan.Config
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)
	var usr2 chan os.Signal
	if w == nil || w.Listener == nil { // this process listens itself
		// SIGUSR2 hands the listeners to a successor; so does SIGHUP, in a
		// process with no supervisor to replace its workers: the
		// application is loaded anew either way. Caught from the start:
		// one before the process serves waits for it.
		usr2 = make(chan os.Signal, 1)
		signal.Notify(usr2, syscall.SIGUSR2, syscall.SIGHUP)
		defer signal.Stop(usr2)
		defer noWorkers(stderr)()
	}

	index, workers := 0, cfg.Threads
	var siblings *prefork.Bus
	who := ""
	if w != nil && w.Listener != nil { // a worker of a supervisor
		index, workers = w.Index, max(w.Live(), 1)
		who = fmt.Sprintf("worker %d (pid %d): ", w.Index, os.Getpid())
		if w.Workers > 1 { // slots: SIGTTIN may add a sibling later
			siblings = w.Bus
		}
	}
	producer := app.Producer()
	hub := newHub(cfg, producer != nil, w, plan.PG)
	if plan.PG != nil {
		if hub != nil {
			plan.PG.Start(hub)
		}
		defer plan.PG.Close() // after the drain
	}
	fmt.Fprintf(stdout, "[worker %d] pid=%d armed for a graceful stop\n", index, os.Getpid())

	// Every way out from here drains what was made: a pool started, a
	// lifespan that started is shut down, whatever ended the start-up.
	var draining []func()
	var drain []Shutdowner
	if hub != nil {
		draining = append(draining, hub.Drain)
		drain = append(drain, hub)
	}
	abort := func(err error) error {
		finish(nil, draining, drain, who, stderr)
		return err
	}
	// --max-requests: the worker counts what every loop serves.
	var requests *counter
	if limit := cfg.requestLimit(); limit > 0 && w != nil && w.Supervised() {
		requests = newCounter(limit, func(n int64) { w.Due("max-requests", dueLine(n)) })
	}
	// One loop per --threads, each with a handler of its own.
	load := newLoad(cfg, w, stderr)
	var loops []*Loop
	for i := range cfg.Threads {
		l, err := app.Make(Context{Worker: index + i, Workers: workers, Config: cfg, Hub: hub, stuck: stuckPool(cfg, w, stderr)})
		if err != nil {
			return abort(makeErr("the application's make", err))
		}
		draining = append(draining, l.Draining...)
		drain = append(drain, l.Drain...)
		if l, err = wrapLoop(l, cfg, hub, siblings, load); err != nil {
			return abort(err)
		}
		if requests != nil {
			l.Handler = requests.wrap(l.Handler)
		}
		loops = append(loops, l)
	}
	if producer != nil && index != 0 {
		producer = nil // one producer runs, on worker 0
	}
	if producer != nil {
		if err := producer.Make(Context{Workers: workers, Config: cfg, Hub: hub}); err != nil {
			return abort(makeErr("the producer's make", err))
		}
	}
	if err := ready(loops, stop); err != nil || stopped(stop) {
		return abort(err) // nil: stopped during start-up, nothing was served
	}
	if w != nil && w.Prepare && !w.Prepared(signalled(stop)) {
		return abort(nil) // the reload was called off, or the server stops
	}
	if w != nil {
		w.Bus.Start(hub)
		bridge(w, hub, plan.PG != nil, stderr)
		if hub != nil {
			warm(w, stderr)
		}
	}
	var ln net.Listener
	var places []string // the ready line's
	var up *listening   // a process that listens itself: SIGUSR2 hands its listeners on
	if w != nil && w.Listener != nil {
		ln = w.Balance(w.Listener, cfg.NoHandoff)
		for _, l := range w.Listeners {
			places = append(places, bind.URLOf(l.Addr(), cfg.Places()...))
		}
	} else {
		lsn, err := listen(cfg)
		if err != nil {
			return abort(err)
		}
		if err := offerLocal(lsn, w); err != nil {
			closeListeners(lsn.ls)
			return abort(&startupError{Msg: "cannot prepare for SIGUSR2: " + err.Error()})
		}
		up = lsn
		ls := lsn.ls
		defer closeListeners(ls) // after the drain: a unix socket's file goes, unless handed on
		removePID, err := writePID(cfg.PIDFile)
		if err != nil {
			closeListeners(ls)
			return abort(err)
		}
		defer removePID()
		lns := make([]net.Listener, len(ls))
		for i, l := range ls {
			lns[i], places = l, append(places, l.URL())
		}
		ln = sock.Merge(lns...)
	}
	servers := make([]front.Server, len(loops))
	served := make(chan error, len(loops))
	var fan []net.Listener
	if len(loops) > 1 {
		fan = front.Fan(ln, len(loops))
	}
	for i, l := range loops {
		if l.inline != nil {
			var count func()
			if requests != nil {
				count = requests.count
			}
			servers[i] = newInlineServer(l, cfg, count)
		} else {
			servers[i] = front.New(l.Handler, cfg.limits())
		}
		var lln net.Listener = ln
		if fan != nil {
			lln = fan[i]
		}
		go func(s front.Server) { served <- s.Serve(lln) }(servers[i])
	}
	// Go's side on one P while the one GIL is the pace (procs.go).
	defer narrowProcs(cfg, load, servers, hub != nil).Stop()
	var runs *producerRun
	if producer != nil {
		runs = startProducer(producer, newPublisher(hub), cfg.AppTick)
		drain = append([]Shutdowner{runs}, drain...)
	}
	fmt.Fprintln(stdout, banner(plan, app, places))
	var gone <-chan struct{}
	if w != nil {
		w.Ready()
		gone = w.Gone()
	}
	notify := notifier() // nil in a worker: its supervisor notifies
	notify.Ready("serving on " + strings.Join(places, ", "))
	stopWatchdog := watchdog(notify)
	defer stopWatchdog()
	if up != nil {
		up.ready()
	}

	var failed error
	handedOn := false
	var handing chan bool // a hand-over under way
wait:
	for {
		select {
		case <-stop:
		case <-gone: // the supervisor was killed: drain, as it would have asked
		case err := <-served:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				failed = &startupError{Msg: "serving stopped: " + err.Error()}
			}
		case sig := <-usr2:
			name := "SIGUSR2"
			if sig == syscall.SIGHUP {
				name = "SIGHUP"
			}
			if handing != nil {
				fmt.Fprintf(stderr, "m0serve: %s: a new process is on its way already; this one serves on\n", name)
				continue
			}
			handing = make(chan bool, 1)
			go func() { handing <- up.handOver(name, stderr) }()
			continue
		case handedOn = <-handing:
			handing = nil
			if !handedOn {
				continue
			}
		}
		break wait
	}
	if !handedOn { // the successor is the service now
		notify.Stopping("draining")
		if up != nil {
			up.stop() // the sockets close with this process's copies; a successor on its way is stopped
		}
	}
	if q, ok := ln.(interface{ Quiesce() }); ok {
		q.Quiesce() // siblings stop handing this worker connections
	}
	finish(servers, draining, drain, who, stderr)
	if w != nil {
		w.Bus.Close()
	}
	return failed
}

// warmTimeout bounds how long a worker that warms waits for a sibling's
// journal before it serves.
const warmTimeout = 2 * time.Second

// warm fills a worker's journal from a serving sibling's, so that a
// client that reconnects to it is replayed what it missed. A replacement's
// journal begins empty, and so does that of a worker that starts after a
// sibling began to serve (the slower of the first workers): frames
// published meanwhile are in the sibling's journal alone. A worker that
// replaces none and finds no sibling serving has missed nothing.
func warm(w *prefork.Worker, stderr io.Writer) {
	tried := false
	for j := range w.Workers {
		if j == w.Index || !w.Page.Serving(j) {
			continue
		}
		tried = true
		ctx, cancel := context.WithTimeout(context.Background(), warmTimeout)
		ok := w.Bus.Warm(ctx, j)
		cancel()
		if ok {
			return
		}
	}
	if !tried && !w.Replaced {
		return
	}
	fmt.Fprintf(stderr, "m0serve: worker %d found no sibling's journal to warm its own from; a client that reconnects to it may be sent a gap\n", w.Index)
}

// bridge joins a worker of a server started by SIGUSR2 to the workers of
// the one it replaces (prefork.Worker.Bridge), before it serves: a client
// whose held stream the old server ends resumes here with nothing missed.
// A hub that journals nothing has nothing to replay, and one on PostgreSQL
// (pg) is sent every frame by it.
func bridge(w *prefork.Worker, hub *realtime.Hub, pg bool, stderr io.Writer) {
	if hub == nil || !hub.Journals() || pg {
		w.Unbridged()
		return
	}
	if bridged, whole := w.Bridge(warmTimeout); bridged && !whole {
		fmt.Fprintf(stderr, "m0serve: worker %d did not get the journals of the server it replaces (SIGUSR2) within %s; a client that resumes here from it may be sent m0-gap\n", w.Index, warmTimeout)
	}
}

// offerLocal registers what a successor is to be handed of a server with
// no supervisor (w, unless nil): its page and its inbox.
func offerLocal(l *listening, w *prefork.Worker) error {
	if w == nil {
		return nil
	}
	p, err := w.Offer()
	if err != nil {
		return err
	}
	defer p.Close() // tableflip keeps copies
	return l.offerPrior(p)
}

// signalled returns a channel closed when stop receives, the signal put
// back for the caller to see.
func signalled(stop chan os.Signal) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		sig := <-stop
		stop <- sig
		close(done)
	}()
	return done
}

// finish is the drain, within DrainTimeout: draining is told, the servers
// finish their requests, then drain is stopped in order. What is still
// running when the time is up is named on stderr, after who: the worker,
// under a supervisor ("worker 1 (pid 4243): "), or nothing. The last
// piece is the interpreter's, when the process loaded Python: its atexit
// handlers, whatever loaded it.
func finish(servers []front.Server, draining []func(), drain []Shutdowner, who string, stderr io.Writer) {
	drain = append(drain[:len(drain):len(drain)], pythonDrain{})
	ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	for _, f := range draining {
		f()
	}
	// Before the bound, the requests still waiting for a thread are
	// answered 503 rather than cut unanswered with the process: as long
	// before it as requests have lately held a thread, and a margin, so
	// that the ones still given a thread finish within it.
	lead := CutoffMargin
	for _, d := range drain {
		if e, ok := d.(interface{ Expected() time.Duration }); ok {
			lead = max(lead, CutoffMargin+e.Expected())
		}
	}
	cut := time.AfterFunc(max(DrainTimeout-lead, 0), func() {
		for _, d := range drain {
			if c, ok := d.(interface{ Cutoff() }); ok {
				c.Cutoff()
			}
		}
	})
	defer cut.Stop()
	var wg sync.WaitGroup
	inFlight := make(chan struct{}, len(servers))
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.Shutdown(ctx) != nil {
				inFlight <- struct{}{}
			}
		}()
	}
	wg.Wait()
	if len(inFlight) > 0 {
		fmt.Fprintf(stderr, "m0serve: %srequests still in flight after %s; exiting anyway\n", who, DrainTimeout)
	}
	for _, d := range drain {
		if err := d.Shutdown(ctx); err != nil {
			fmt.Fprintf(stderr, "m0serve: %s%v after the %s drain; exiting anyway\n", who, err, DrainTimeout)
		}
	}
}

// ready runs the loops' start-up steps, all at once; a SIGTERM or SIGINT
// meanwhile ends them (and is put back for the caller to see).
func ready(loops []*Loop, stop chan os.Signal) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, len(loops))
	n := 0
	for _, l := range loops {
		if l.Ready != nil {
			n++
			go func() { done <- l.Ready(ctx) }()
		}
	}
	for ; n > 0; n-- {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case sig := <-stop:
			stop <- sig
			return nil
		}
	}
	return nil
}

// stopped reports whether a signal to stop is waiting, leaving it there.
func stopped(stop chan os.Signal) bool {
	select {
	case sig := <-stop:
		stop <- sig
		return true
	default:
		return false
	}
}

// banner is the ready line; places are where the server listens, as
// bind.URLOf names them.
func banner(p *Plan, app *adapted, places []string) string {
	c := p.Config
	name, protocol, mode := app.Banner(p)
	workers := fmt.Sprintf("workers=%d", c.Workers)
	if c.Threads > 1 {
		workers += fmt.Sprintf(" threads=%d", c.Threads)
	}
	line := fmt.Sprintf("🔥 m0serve: %s on %s (protocol=%s %s)", name, strings.Join(places, ", "), protocol, workers)
	if mode != "" {
		line += " " + mode // none when every mount is a hold
	}
	return line
}

// watchdog sends the service manager WATCHDOG=1 as often as it asks, until
// the function it returns is called.
func watchdog(n *sdnotify.Notifier) (stop func()) {
	every := n.WatchdogEvery()
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				n.Watchdog()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

// noWorkers answers SIGTTIN and SIGTTOU in a single process, which has no
// workers to add or drain (rather than being stopped, their default), until
// the returned function is called.
func noWorkers(stderr io.Writer) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTTIN, syscall.SIGTTOU)
	go func() {
		for sig := range sigs {
			name := "SIGTTIN"
			if sig == syscall.SIGTTOU {
				name = "SIGTTOU"
			}
			fmt.Fprintf(stderr, "m0serve: %s: a single process has no workers to add or drain; run with --workers N for a supervisor\n", name)
		}
	}()
	return func() { signal.Stop(sigs); close(sigs) }
}
