package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/realtime/pgbus"

	"github.com/m0serve/m0/internal/boot"
	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/realtime"
)

// Check is one condition serving needs. Serving stops at the first that
// fails, with its exit code; the doctor prints them all.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"` // what was found, when it failed
	Fix    string `json:"fix,omitempty"`    // what to do about it
	Exit   int    `json:"exit,omitempty"`   // the exit code it causes
	// Traceback is the application's, when importing it failed.
	Traceback string `json:"traceback,omitempty"`
	// Warning is what an OK check found that serving goes on with, and
	// prints at start-up as one line (the GIL an extension module turned
	// back on).
	Warning string `json:"warning,omitempty"`

	err error // as serving reports it
}

// pending names the settings whose features this build does not have yet:
// each is parsed and validated, and refused when it asks for anything but
// its default.
var pending = map[string]string{}

// maxReplayFrames is the most frames a worker journals.
const maxReplayFrames = realtime.MaxReplayFrames

// configChecks returns the checks of the configuration alone, in the
// order serving applies them.
func configChecks(c *Config) []Check {
	cs := listenChecks(c)
	add := func(name string, ok bool, detail, fix string) { cs = append(cs, configCheck(name, ok, detail, fix)) }
	add("replay-frames", c.ReplayFrames <= maxReplayFrames,
		fmt.Sprintf("--replay-frames %d is more than %d", c.ReplayFrames, maxReplayFrames),
		fmt.Sprintf("pass --replay-frames or set M0_REPLAY_FRAMES to at most %d", maxReplayFrames))
	add("workers", c.Workers >= 1,
		fmt.Sprintf("%d workers", c.Workers), "pass --workers or set M0_WORKERS to 1 or more")
	add("threads", c.Threads >= 1,
		fmt.Sprintf("%d threads", c.Threads), "pass --threads or set M0_THREADS to 1 or more")
	add("max-requests-jitter", c.MaxRequestsJitter == 0 || c.MaxRequests > 0,
		fmt.Sprintf("--max-requests-jitter %d without --max-requests", c.MaxRequestsJitter),
		"pass --max-requests N too (the jitter is added to it), or leave the jitter unset")
	add("access-log-fields", len(c.AccessLogFields) == 0 || c.AccessLogFormat == "",
		"--access-log-fields "+strings.Join(c.AccessLogFields, ",")+" beside --access-log-format: the fields are the JSON lines'",
		"put the headers in the format instead (%({User-Agent}i)s, %({Referer}i)s, %({X-Request-ID}i)s), or leave --access-log-format out")
	add("threads-and-workers", !(c.Threads > 1 && c.Workers > 1),
		fmt.Sprintf("--threads %d beside --workers %d", c.Threads, c.Workers),
		"use one of --threads and --workers, not both")
	for _, s := range settings {
		what, ok := pending[s.name]
		if !ok || c.Sources[s.name] == FromDefault || s.isDefault(c) ||
			s.name == "replay-frames" && c.ReplayFrames > maxReplayFrames { // refused above already
			continue
		}
		how := "--" + s.name
		if c.Sources[s.name] == FromEnv {
			how = s.env
		}
		add(s.name, false,
			fmt.Sprintf("%s=%s asks for %s, which this m0serve does not support yet", how, c.Values[s.name], what),
			leaveUnset(s.name))
	}
	for _, e := range flaglessEnv {
		if v, ok := c.Env[e.name]; ok && v != e.def && e.set == nil {
			fix := "unset " + e.name
			if why, ok := notBuilt[e.name]; ok {
				fix += "; " + why
			}
			add(e.name, false,
				fmt.Sprintf("%s=%s is for %s, which this m0serve does not build", e.name, v, e.feature), fix)
		}
	}
	if c.GrantKey != "" || c.GrantKeyPrev != "" {
		// The key signs in the application too (m0serve.grant), with or
		// without a hold mount here: one too short is refused either way.
		_, err := GrantKeys(c)
		var r *refusal
		errors.As(err, &r)
		ch := Check{Name: "grant-key", OK: err == nil}
		if r != nil {
			ch.Detail, ch.Fix, ch.Exit = r.Found, r.Fix, ExitConfig
		}
		cs = append(cs, ch)
	}
	for _, m := range c.StaticDirs() {
		fi, err := os.Stat(m.Dir)
		if err == nil {
			var root *os.Root
			if root, err = os.OpenRoot(m.Dir); err == nil { // as serving opens it
				root.Close()
			}
		}
		add("static", err == nil && fi.IsDir(),
			fmt.Sprintf("--static %s=%s: %s is not a directory this process can open", m.Prefix, m.Dir, m.Dir),
			"name a directory that exists, relative to the working directory or absolute")
	}
	if c.Inverted {
		var beside []string
		for _, f := range []struct {
			set  bool
			flag string
		}{
			{c.Realtime, "--realtime"}, {len(c.Mounts) > 0, "--mount"}, {c.Threads > 1, "--threads"},
			{c.Interpreters > 0, "--interpreters"}, {c.ASGIBuffered(), "--blocking-threads"},
			{c.Metrics, "--metrics"}, {c.accessLogged(), "--access-log"}, {c.LimitConcurrency > 0, "--limit-concurrency"},
		} {
			if f.set {
				beside = append(beside, f.flag)
			}
		}
		list := strings.Join(beside, ", ")
		add("inverted", len(beside) == 0,
			"M0_INVERTED=1 beside "+list+": the inverted loop serves one unmounted ASGI application on the executor, "+
				"and its requests pass no middleware that counts, logs or bounds every request",
			"unset M0_INVERTED, or leave out "+list)
	}
	add("health-path", !(c.Metrics && c.HealthPath == observe.MetricsPath),
		fmt.Sprintf("--health-path %s is the path --metrics answers", c.HealthPath),
		"pass another --health-path")
	add("qos", c.QoS == "" || qosPermitted(c.QoS),
		fmt.Sprintf("--qos %s needs a nice level of %d, which this process may not take", c.QoS, qosLinux[c.QoS].nice),
		"run as root or with CAP_SYS_NICE (or a higher RLIMIT_NICE), or pass a class from default down")
	return cs
}

// configCheck is a check of the configuration: when it fails, what was
// found, the fix, and exit 78.
func configCheck(name string, ok bool, detail, fix string) Check {
	ch := Check{Name: name, OK: ok}
	if !ok {
		ch.Detail, ch.Fix, ch.Exit = detail, fix, ExitConfig
	}
	return ch
}

// leaveUnset is the fix of a setting refused when it is set: "leave
// --NAME and M0_NAME unset", or without the variable when it has none.
func leaveUnset(name string) string {
	for _, s := range settings {
		if s.name == name && s.env != "" {
			return "leave --" + name + " and " + s.env + " unset"
		}
	}
	return "leave --" + name + " unset"
}

// Plan is what serving would do with a configuration: its checks, in
// order, and what they found. The doctor prints it; serving acts on it.
type Plan struct {
	Config *Config
	Checks []Check
	python *cpython.Interpreter // nil when none could be used
	// PG is the PostgreSQL bus --pg-listen names, opened by its check; nil
	// without --pg-listen, or when it could not be opened.
	PG     *pgbus.Bus
	App    *m0.App // nil without an application, or when it failed
	AppDir string  // the absolute --app-dir
	// EventLoop is the loop the ASGI executor runs ("uvloop" or
	// "asyncio"), or "" when no executor serves the application.
	EventLoop string
	// MaxWorkers and MaxThreads are what the application declares; 0 is
	// any number.
	MaxWorkers, MaxThreads int
	// Mounts are the applications mounted under prefixes, for the doctor.
	Mounts []MountReport
	// Protocol is what the doctor's topology says the application speaks:
	// "wsgi", "asgi", the mounts' joined by "+", or "go"; "" is the
	// loaded application's.
	Protocol string
	// gil is the interpreter's lock on a free-threaded build, after
	// CheckGIL; nil on a GIL build.
	gil *cpython.GILState
	// goPool is the pool behind each loop a Go application asks for
	// (its PoolThreads), for the doctor's topology.
	goPool int
}

// MountReport is what the doctor says of one mount.
type MountReport struct {
	Prefix   string `json:"prefix"`
	Spec     string `json:"spec"`
	Protocol string `json:"protocol,omitempty"` // "wsgi", "asgi" or "hold"; empty when it did not load
	Mode     string `json:"mode,omitempty"`     // "pool", "executor", "buffered", "loop" or "hold"
}

// newPlan runs the checks serving applies, in order: the configuration,
// what the application declares against it, and, when withApp (a
// supervisor leaves them to its workers), the application's own (for
// m0serve: the interpreter, then the import).
func newPlan(c *Config, app *adapted, withApp bool) *Plan {
	p := &Plan{Config: c}
	for _, ch := range configChecks(c) {
		p.Checks = append(p.Checks, ch)
		if ch.Name == "threads-and-workers" {
			p.Checks = append(p.Checks, topologyChecks(c, app)...)
		}
	}
	if c.PGListen != "" && p.Err() == nil {
		p.openPG()
	}
	p.AppDir, _ = filepath.Abs(c.AppDir)
	p.MaxWorkers, p.MaxThreads = app.MaxWorkers(), app.MaxThreads()
	p.goPool = app.poolThreads(c)
	if withApp {
		app.Check(p)
	}
	return p
}

// Fail appends a failed check for err: its exit code, and the found and
// fix of a *m0.Refusal.
func (p *Plan) Fail(name string, err error) {
	ch := Check{Name: name, Exit: codeOf(err), Detail: err.Error(), err: err}
	var r *refusal
	var s *startupError
	switch {
	case errors.As(err, &r):
		ch.Detail, ch.Fix = r.Found, r.Fix
	case errors.As(err, &s):
		ch.Traceback = s.Detail
		ch.Fix = "fix the application so that it imports, or name another with MODULE[:ATTR] and --app-dir"
	}
	p.Checks = append(p.Checks, ch)
}

// Err returns the first failed check as the error serving reports: a
// *m0.Refusal for exit 78, a *m0.StartupError for exit 1.
func (p *Plan) Err() error {
	for _, ch := range p.Checks {
		switch {
		case ch.OK:
		case ch.err != nil:
			return ch.err
		case ch.Exit == ExitConfig:
			return &refusal{Found: ch.Detail, Fix: ch.Fix}
		default:
			return &startupError{Msg: ch.Detail}
		}
	}
	return nil
}

// CheckPython starts the interpreter the application will run on (the
// libpython of the python3 on PATH, or M0_PYTHON_LIBRARY's), for the
// doctor's report, and reports whether it could. One it cannot load is
// refused (78) with the fix.
func (p *Plan) CheckPython() bool {
	rt := p.runtime("python")
	if rt == nil {
		return false
	}
	in := rt.Interp
	p.python = &in
	p.Checks = append(p.Checks, Check{Name: "python", OK: true})
	return true
}

// runtime is the interpreter, started once per process, or nil after the
// check name failed with why it cannot start.
func (p *Plan) runtime(name string) *cpython.Runtime {
	rt, err := boot.Python()
	if err != nil {
		p.Fail(name, err)
		return nil
	}
	return rt
}

// startInterpreters makes the process's subinterpreters, once: each with
// the pool's threads, at least one (--blocking-threads 0 with an ASGI
// application on the executor, whose loops take no place of the pool's).
func startInterpreters(c *Config) error {
	rt, err := boot.Python()
	if err != nil {
		return err
	}
	per, _ := c.PoolSize()
	return rt.StartInterpreters(c.Interpreters, max(per, 1))
}

// CheckInterpreters refuses --interpreters (78) where it cannot run: a
// CPython without OwnGILInterpreters (older than 3.13, or free-threaded),
// a WSGI application with no pool (--blocking-threads 0). An ASGI
// application on the executor runs a loop in each interpreter, on the
// buffered path (--blocking-threads N) a loop on each of their pool's
// threads. Otherwise it makes the subinterpreters and
// imports every application (apps, WSGI and ASGI) into each, as serving
// will: an extension module that does not support subinterpreters is
// refused by name (the doctor reports the same check).
func (p *Plan) CheckInterpreters(apps []*m0.App) bool {
	c := p.Config
	if c.Interpreters == 0 {
		return true
	}
	rt := p.runtime("interpreters")
	if rt == nil {
		return false
	}
	in := rt.Interp
	refuse := func(detail, fix string) bool {
		p.Checks = append(p.Checks, Check{Name: "interpreters", Exit: ExitConfig,
			Detail: fmt.Sprintf("--interpreters %d: %s", c.Interpreters, detail), Fix: fix})
		return false
	}
	switch {
	case in.GILDisabled:
		return refuse(in.WhyNoInterpreters(),
			"leave --interpreters out and set --blocking-threads N, or run a GIL build (python3.13, not python3.13t)")
	case !in.OwnGILInterpreters():
		return refuse(in.WhyNoInterpreters(), "run CPython 3.13 or newer, or use --workers N for N processes")
	case c.BlockingThreads == 0 && slices.ContainsFunc(apps, func(a *m0.App) bool { return BridgeMode(c, a) == "loop" }):
		return refuse("--blocking-threads 0 runs every WSGI request on one thread of the main interpreter",
			"set --blocking-threads N (threads in each interpreter), or leave it at auto")
	case c.Interpreters > cpython.MaxInterpreters:
		return refuse(fmt.Sprintf("at most %d subinterpreters", cpython.MaxInterpreters), "use at most one a core, and --workers N for more processes")
	}
	if err := startInterpreters(c); err != nil {
		p.Fail("interpreters", &startupError{Msg: "cannot make the subinterpreters: " + err.Error()})
		return false
	}
	for _, a := range apps {
		err := rt.CheckInSubinterpreters(cpython.Unwrap(a))
		var ext *cpython.ExtensionError
		switch {
		case errors.As(err, &ext):
			return refuse(fmt.Sprintf("%s imports the extension module %s, which does not support subinterpreters (a single-phase-init module)", a.Spec, ext.Module),
				fmt.Sprintf("serve it with --workers N (N processes) and no --interpreters, or upgrade %s to a release that supports subinterpreters", strings.SplitN(ext.Module, ".", 2)[0]))
		case err != nil:
			p.Fail("interpreters", &startupError{Msg: fmt.Sprintf("importing %s in a subinterpreter failed", a.Spec), Detail: err.Error()})
			return false
		}
	}
	detail := fmt.Sprintf("%d subinterpreters, own GIL each", c.Interpreters)
	if slices.ContainsFunc(apps, func(a *m0.App) bool { return BridgeMode(c, a) != "executor" }) {
		per, _ := c.PoolSize()
		detail += fmt.Sprintf(", at most %d requests at once in each on the pool", per)
	}
	if slices.ContainsFunc(apps, func(a *m0.App) bool { return BridgeMode(c, a) == "executor" }) {
		detail += ", an asyncio loop in each for the ASGI executor"
	}
	p.Checks = append(p.Checks, Check{Name: "interpreters", OK: true, Detail: detail})
	return true
}

// CheckGIL looks, once the applications are imported, at the
// interpreter's lock on a free-threaded build. An ASGI application there
// (asgi names the first, "" for none) is refused (78): the executor runs
// one asyncio loop, which the GIL's absence does not speed up, and its C
// side is not made safe without one. A GIL an extension module turned back
// on as it was imported is reported, with the module, as a warning of an
// OK check ("gil"); serving goes on, one Python thread at a time. On a GIL
// build it adds nothing. It runs after CheckPython.
func (p *Plan) CheckGIL(asgi string) bool {
	rt := p.runtime("gil")
	if rt == nil || !rt.Interp.GILDisabled {
		return rt != nil
	}
	in := rt.Interp
	if asgi != "" {
		p.Checks = append(p.Checks, Check{Name: "free-threaded", Exit: ExitConfig,
			Detail: fmt.Sprintf("%s is an ASGI application, and %s (Python %s) is a free-threaded build: the ASGI executor runs one asyncio loop, which gains nothing without the GIL, and is not built to run without it", asgi, in.Executable, in.Version),
			Fix:    "run it on a GIL-enabled CPython (python3.13, not python3.13t; with uv, put 3.13 in .python-version), or serve a WSGI application on this one"})
		return false
	}
	st, err := rt.GIL()
	if err != nil {
		p.Fail("gil", &startupError{Msg: "cannot read the GIL's state: " + err.Error()})
		return false
	}
	p.gil = &st
	ch := Check{Name: "gil", OK: true}
	if st.Enabled {
		ch.Warning = gilWarning(st)
	}
	p.Checks = append(p.Checks, ch)
	return true
}

// gilWarning is the line that says a free-threaded build runs with its GIL
// on, and why.
func gilWarning(st cpython.GILState) string {
	switch {
	case strings.HasPrefix(st.By, "PYTHON_GIL="):
		return fmt.Sprintf("the GIL is on (%s): Python threads run one at a time; unset it to let the pool's threads run at once", st.By)
	case st.By != "":
		return fmt.Sprintf("the GIL is on: importing %s turned it back on, as the module does not declare that it runs without it, so Python threads run one at a time; "+
			"upgrade it to a release that supports free-threading, or set PYTHON_GIL=0 to keep the GIL off at your own risk", st.By)
	}
	return "the GIL is on (-X gil=1, or a module imported before the application's): Python threads run one at a time"
}

// CheckLoop resolves the event loop the ASGI executors will run (--loop),
// and reports whether it can. Under --interpreters the executors' loops
// are asyncio's: uvloop's extension modules do not load in a
// subinterpreter, and --loop uvloop is refused (78). It runs after
// CheckPython.
func (p *Plan) CheckLoop() bool {
	rt := p.runtime("loop")
	if rt == nil {
		return false
	}
	have := false
	err := rt.Main(func(t cpython.Thread) error {
		s, err := t.Eval(`__import__("importlib.util").util.find_spec("uvloop") is not None`)
		have = s == "True"
		return err
	})
	switch want := p.Config.Loop; {
	case err != nil:
		p.Fail("loop", &startupError{Msg: "cannot look for uvloop: " + err.Error()})
		return false
	case want == "uvloop" && p.Config.Interpreters > 0:
		p.Checks = append(p.Checks, Check{
			Name: "loop", Exit: ExitConfig,
			Detail: fmt.Sprintf("--loop uvloop with --interpreters %d: uvloop's extension modules do not support subinterpreters, and each interpreter runs its own loop", p.Config.Interpreters),
			Fix:    "pass --loop auto or asyncio (asyncio's loop in each interpreter), or leave --interpreters out and use --workers N for N processes with uvloop",
		})
		return false
	case want == "uvloop" && !have:
		p.Checks = append(p.Checks, Check{
			Name: "loop", Exit: ExitConfig,
			Detail: "--loop uvloop, and uvloop is not installed in this interpreter",
			Fix:    "pip install uvloop into the application's environment, or pass --loop auto or asyncio",
		})
		return false
	case want == "asyncio" || !have || p.Config.Interpreters > 0:
		p.EventLoop = "asyncio"
	default:
		p.EventLoop = "uvloop"
	}
	p.Checks = append(p.Checks, Check{Name: "loop", OK: true})
	return true
}

// pgTimeout bounds the check that PostgreSQL answers.
const pgTimeout = 5 * time.Second

// openPG opens --pg-listen's database: the schema made, the epoch read.
// One that cannot be reached is refused (78) with the fix.
func (p *Plan) openPG() {
	c := p.Config
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	b, err := pgbus.Open(ctx, c.PGListen)
	if err != nil {
		how := "--pg-listen"
		if c.Sources["pg-listen"] == FromEnv {
			how = "M0_PG_LISTEN"
		}
		p.Checks = append(p.Checks, Check{Name: "pg-listen", Exit: ExitConfig,
			Detail: fmt.Sprintf("%s=%s: %s", how, pgbus.Redact(c.PGListen), strings.Join(strings.Fields(err.Error()), " ")),
			Fix: "name a PostgreSQL that is up and takes connections from here, as postgres://USER:PASSWORD@HOST:PORT/DB; " +
				"not a PgBouncer in transaction mode, which cannot LISTEN (point " + how + " at PostgreSQL itself or a session-mode pool)"})
		return
	}
	p.PG = b
	p.Checks = append(p.Checks, Check{Name: "pg-listen", OK: true})
}
