package host

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/m0serve/m0/internal/version"
	"github.com/m0serve/m0/prefork"
)

// parseArgs reads args and the M0_* variables. When done, the process ends
// with code: after --help or --version, or a command line it could not read (reported
// on stderr, or as the doctor's JSON under --doctor).
func parseArgs(args []string, getenv func(string) string) (cfg *Config, code int, done bool) {
	cfg, err := Parse(args, getenv)
	switch {
	case isHelp(err):
		printHelp(os.Stdout)
		return nil, ExitOK, true
	case isVersion(err):
		fmt.Fprintln(os.Stdout, version.Line())
		return nil, ExitOK, true
	case err != nil && wantsDoctor(args):
		usageReport(err).Print(os.Stdout)
		return nil, ExitUsage, true
	case err != nil:
		return nil, report(os.Stderr, err), true
	}
	return cfg, 0, false
}

// serve runs a parsed configuration for app: the doctor, or the checks
// and then the application, with what the flags put around it, served until a drain; under
// --workers N or --reload, the supervisor of worker processes that each
// do that. Log lines go to stderr in m0serve's format. It returns the
// process's exit code.
func serve(cfg *Config, getenv func(string) string, app *adapted) int {
	slog.SetDefault(slog.New(newLogHandler(os.Stderr, nil)))
	w, err := prefork.Inherited()
	if err != nil {
		return report(os.Stderr, &startupError{Msg: err.Error()})
	}
	cfg.worker = w != nil
	if w == nil {
		// Before Python starts, and before a worker is: the service
		// manager's variables are the main process's alone, and a
		// successor's hand-over (SIGUSR2) its own.
		takeOver()
		notifier()
	} else if w.Supervised() {
		// The supervisor's signals, which reach a worker too when the
		// service manager signals the whole group: not the worker's.
		// Caught rather than ignored, so that what the application
		// starts does not inherit them ignored.
		theirs := make(chan os.Signal, 1)
		signal.Notify(theirs, syscall.SIGHUP, syscall.SIGUSR2, syscall.SIGTTIN, syscall.SIGTTOU)
		go func() {
			for range theirs {
			}
		}()
	}
	if w == nil { // the supervisor says them, not each worker again
		for _, note := range cfg.Notes {
			fmt.Fprintln(os.Stderr, note)
		}
	}
	if w == nil && !cfg.Doctor && supervised(cfg) {
		return supervise(cfg, app)
	}
	if w == nil && cfg.Realtime && !cfg.Doctor {
		// A child process the application starts publishes to this one
		// as to a worker of a supervisor.
		prior := handedPrior()
		if !bridges(cfg) {
			prior.Close()
			prior = nil
		}
		if w, err = prefork.Local(prior); err != nil {
			return report(os.Stderr, &startupError{Msg: err.Error()})
		}
	}
	if !cfg.Realtime {
		os.Unsetenv(prefork.BusEnv) // another server's, inherited: not this one's
	}
	if w != nil && cfg.Realtime {
		// Before Python starts, so that os.environ has it.
		if err := w.SetChildEnv(); err != nil {
			return report(os.Stderr, &startupError{Msg: "cannot name the bus to child processes: " + err.Error()})
		}
	}
	fail := func(err error) int {
		if err == nil || w == nil || !w.Supervised() {
			return report(os.Stderr, err)
		}
		// The supervisor prints it, once for all the workers.
		var b bytes.Buffer
		code := report(&b, err)
		w.Failed(code, b.String())
		return code
	}
	plan := newPlan(cfg, app, true)
	if cfg.Doctor {
		if plan.PG != nil {
			plan.PG.Close()
		}
		report := newReport(plan, getenv)
		report.Print(os.Stdout)
		return report.Exit
	}
	if err := plan.Err(); err != nil {
		return fail(err)
	}
	if w == nil || w.Index == 0 { // once, not once a worker
		for _, ch := range plan.Checks {
			if ch.Warning != "" {
				fmt.Fprintln(os.Stderr, "m0serve: "+ch.Warning)
			}
		}
	}
	if err := applyQoS(cfg); err != nil {
		return fail(err)
	}
	return fail(run(plan, app, w, os.Stdout, os.Stderr))
}

// supervised reports whether a configuration runs worker processes under a
// supervisor: --workers given (--workers 1 is one worker under a
// supervisor, which SIGHUP replaces, as gunicorn's), --reload, or a
// worker's replacement as it ages (--max-requests, --workers-max-rss,
// --workers-lifetime).
func supervised(c *Config) bool {
	return c.Workers > 1 || c.Sources["workers"] != FromDefault || c.Reload || c.recycling()
}

// workerSlots is how many workers a supervisor started with n has room
// for: n, and n more (4 more at least) for SIGTTIN, within
// prefork.MaxWorkers. Each spare slot costs a socket pair and nothing
// else until it runs a worker.
func workerSlots(n int) int { return min(n+max(n, 4), max(prefork.MaxWorkers, n)) }

// supervise runs the supervisor: it binds the listener, starts the workers
// (this binary again, with the same arguments), and keeps them serving
// until SIGTERM or SIGINT. It never loads Python: the configuration's
// checks are its own, the application's each worker's.
func supervise(cfg *Config, app *adapted) int {
	plan := newPlan(cfg, app, false)
	if plan.PG != nil {
		plan.PG.Close() // checked: each worker opens its own
	}
	if err := plan.Err(); err != nil {
		return report(os.Stderr, err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)
	// SIGHUP replaces every worker, one at a time, each loading the
	// application anew.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// SIGUSR2 starts a successor with the listeners; once it serves, this
	// supervisor drains its workers and exits 0.
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)
	// SIGTTIN adds a worker, SIGTTOU drains the last, as gunicorn's.
	ttin := make(chan os.Signal, 4)
	signal.Notify(ttin, syscall.SIGTTIN, syscall.SIGTTOU)
	defer signal.Stop(ttin)
	replace := make(chan prefork.Replacement, 1)
	go func() {
		for range hup {
			replace <- prefork.Replacement{Slot: -1, Why: "SIGHUP", Reason: "sighup"}
		}
	}()
	lsn, err := listen(cfg)
	if err != nil {
		return report(os.Stderr, err)
	}
	ls := lsn.ls
	defer closeListeners(ls) // the unix socket files go once every worker has, unless handed on
	// The workers serve the listeners; the supervisor keeps a copy of
	// each, which it lets go of as the drain begins.
	files := make([]*os.File, len(ls))
	var places []string
	for i, l := range ls {
		if files[i], err = l.File(); err != nil {
			return report(os.Stderr, &startupError{Msg: "cannot pass the listener on: " + err.Error()})
		}
		l.Close()
		places = append(places, l.URL())
	}
	removePID, err := writePID(cfg.PIDFile)
	if err != nil {
		return report(os.Stderr, err)
	}
	defer removePID()
	slots := workerSlots(cfg.Workers)
	mesh, err := prefork.NewMesh(files[0], slots, files[1:]...)
	if err != nil {
		return report(os.Stderr, &startupError{Msg: err.Error()})
	}
	defer mesh.Close()
	for i := range cfg.Workers {
		mesh.Page.SetInUse(i, true)
	}
	if p := handedPrior(); p != nil {
		if !bridges(cfg) {
			p.Close()
		} else if err := mesh.Follow(p); err != nil {
			fmt.Fprintf(os.Stderr, "m0serve: cannot bridge to the server this one replaces (%v); a client that resumes here from it may be sent m0-gap\n", err)
		}
	}
	// After the prior is read: offering replaces what was handed under the
	// same names.
	if cfg.Realtime {
		if err := lsn.offerPrior(mesh.Offer()); err != nil {
			return report(os.Stderr, &startupError{Msg: "cannot prepare for SIGUSR2: " + err.Error()})
		}
	}
	scale := make(chan int, 4)
	go func() {
		for sig := range ttin {
			if sig == syscall.SIGTTIN {
				scale <- 1
			} else {
				scale <- -1
			}
		}
	}()
	notify := notifier()
	status := fmt.Sprintf("%d workers serving on %s", cfg.Workers, strings.Join(places, ", "))
	if cfg.Workers == 1 {
		status = "1 worker serving on " + strings.Join(places, ", ")
	}
	sup := &prefork.Supervisor{
		Workers:   cfg.Workers,
		Spawn:     mesh.Exec(os.Args, os.Environ(), os.Stdout, os.Stderr),
		Stderr:    os.Stderr,
		Drain:     DrainTimeout,
		Exit:      mesh.Page.Release,
		Ready:     func() { mesh.Unfollow(); notify.Ready(status); lsn.ready() },
		Reloading: func() { notify.Reloading("reloading: new workers load the application") },
		Replace:   replace,
		MaxRSS:    int64(cfg.WorkersMaxRSS) << 20,
		Lifetime:  cfg.WorkersLifetime,
		Count:     mesh.Page.CountReplacement,
		Slots:     slots,
		Scale:     scale,
		InUse:     mesh.Page.SetInUse,
	}
	defer watchdog(notify)()
	if cfg.Reload {
		dirs := cfg.ReloadDirs
		if len(dirs) == 0 {
			dirs = []string{cfg.AppDir}
		}
		watch, err := prefork.Watch(dirs, prefork.ReloadDebounce)
		if err != nil {
			return report(os.Stderr, &refusal{Found: "--reload cannot watch " + strings.Join(dirs, ", ") + ": " + err.Error(),
				Fix: "name directories that exist with --reload-dir"})
		}
		defer watch.Close()
		sup.Reload = watch.Changes()
	}
	// On SIGTERM the supervisor lets go of the listener first: once the
	// workers have let go of theirs (each as its drain begins), a new
	// connection is refused at once rather than queued for no one.
	var handedOn atomic.Bool
	hold := make(chan bool, 1)
	sup.Hold = hold
	go func() {
		for range usr2 {
			// No worker is replaced while the successor starts: the workers
			// it bridges to are the ones serving, and they drain soon.
			hold <- true
			if !lsn.handOver("SIGUSR2", os.Stderr) {
				hold <- false
				continue
			}
			handedOn.Store(true)
			stop <- syscall.SIGTERM
			return
		}
	}()
	sup.Stopping = func() {
		if !handedOn.Load() { // the successor is the service now
			notify.Stopping("draining")
			lsn.stop() // the sockets close with the workers' copies; a successor on its way is stopped
		}
		for _, f := range files {
			f.Close()
		}
	}
	return sup.Run(stop)
}
