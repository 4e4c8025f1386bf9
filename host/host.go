// Package host is the engine of the m0serve command, for any Go program:
// the flags and M0_* variables, the doctor, the refusals and exit codes,
// the limits, the health path, the metrics, the access log, the held
// streams, the workers and the drain. The application supplies a factory
// of handlers; the host owns the listener, the loops, the signals and the
// drain. m0serve itself is this host run with its Python application.
//
//	func main() {
//		host.Main(app{})
//	}
//
// The host calls the application's Make once per accept loop (per worker,
// or per loop under --threads N) and, for a Go application, once per pool
// thread behind each loop (--blocking-threads N), so that each builds a
// handler of its own. A handler that also serves fasthttp (ServeFastHTTP,
// as middleware.FastHandler) is served by fasthttp; any other http.Handler
// by net/http.
package host

import (
	"fmt"
	"github.com/m0serve/m0/internal/wire"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/m0serve/m0/internal/front"
	"github.com/m0serve/m0/internal/pid1"
	"github.com/m0serve/m0/realtime"
)

// Application is what a program hands the host: a factory of handlers.
// Make returning an error ends the process: a *m0.Refusal, *UsageError or
// *m0.StartupError with its own exit code, any other error with 78 and its
// message. It is not retried. Make registers what its handlers need at
// start-up and at the drain with ctx.Ready and ctx.Drain.
//
// An Application may also have these methods, each optional:
//
//	MaxWorkers() int           // at most this many workers (0: any); 1 for state held in the handler
//	MaxThreads() int           // at most this many loops under --threads (0: any)
//	Why(what string) string    // why MaxWorkers ("workers") or MaxThreads ("threads") is the bound
//	Producer() Producer        // work on a cadence, publishing to held streams
//	PoolThreads(*Config) int   // the pool threads behind each loop (default PoolThreads(c))
//	LoadsPython() bool         // true: Make loads Python applications (m0.LoadApp), so --app-dir,
//	                           // --reload, --loop and --qos apply, and the interpreter is checked first
//	Check(p *Plan)             // the application's own checks, in place of the host's for a Go
//	                           // application: an interpreter, an import; the doctor runs them too
//	Banner(p *Plan) (name, protocol, mode string) // what the ready line says of it
type Application interface {
	Make(ctx Context) (http.Handler, error)
}

// ParseFlags resolves the command line and the M0_* variables as m0serve
// does, for a program that prints its own address before it serves. On
// --help it prints the flags and exits 0; on a command line it cannot read
// it prints why (the doctor's JSON under --doctor) and exits 2.
func ParseFlags() *Config {
	cfg, code, done := parseArgs(os.Args[1:], os.Getenv)
	if done {
		os.Exit(code)
	}
	return cfg
}

// Serve serves app with cfg (nil: ParseFlags()) until SIGTERM or SIGINT
// and the drain, and returns the process's exit code: 0 after a drain, 78
// for a configuration the checks refuse or a Make that failed (its message
// on stderr), 1 when serving could not start. --doctor prints the report
// instead and returns the code serving would.
func Serve(app Application, cfg *Config) int {
	if cfg == nil {
		cfg = ParseFlags()
	}
	return serve(cfg, os.Getenv, &adapted{app: app})
}

// Main runs the process for app: as PID 1 it first becomes a child of an
// init of its own (signals forwarded, orphans reaped); then it calls Serve
// and exits with its code.
func Main(app Application) {
	if code, ok := pid1.RunAsInit(); ok {
		os.Exit(code)
	}
	os.Exit(Serve(app, nil))
}

// ServeStrict serves srv on ln with m0serve's strict reading of requests
// (docs/reliability.md): a Go program's own http.Server refuses what
// m0serve refuses (request smuggling shapes, obsolete folding, bare LF,
// versions other than 1.x, oversized heads) before its handler sees it.
// It sets srv's Handler and ConnContext to wrappers of theirs.
func ServeStrict(srv *http.Server, ln net.Listener) error { return front.ServeStrict(srv, ln) }

// PoolThreads is the pool behind each loop of a Go application that has
// no PoolThreads method of its own: the --blocking-threads given, or none
// when it is left at its default (a Go handler runs on the goroutines of
// its loop unless a pool is asked for).
func PoolThreads(c *Config) int {
	if c.Sources["blocking-threads"] == FromDefault {
		return 0
	}
	return wire.PoolSize(c.BlockingThreads, false) // Go handlers: the cap is the seed's
}

// adapted is an Application as the engine serves it: each optional
// method asked for once, with its default where it has none.
type adapted struct {
	app Application
}

// pythonSettings are m0serve's settings for the Python application it
// loads, which a Go program refuses; loaderSettings it takes only when it
// loads Python applications itself (LoadsPython), through ctx.Config.
var (
	pythonSettings = []string{"protocol", "mount", "interpreters"}
	loaderSettings = []string{"app-dir", "loop", "qos", "reload", "reload-dir"}
)

func (a *adapted) loadsPython() bool {
	l, ok := a.app.(interface{ LoadsPython() bool })
	return ok && l.LoadsPython()
}

func (a *adapted) Check(p *Plan) {
	if c, ok := a.app.(interface{ Check(p *Plan) }); ok {
		c.Check(p)
		return
	}
	c := p.Config
	if c.App != "" {
		p.Fail("app", &UsageError{Msg: fmt.Sprintf("%s serves its own application and takes no MODULE[:ATTR] (%s was given)",
			name(), c.App)})
		return
	}
	refused := pythonSettings
	if !a.loadsPython() {
		refused = append(refused[:len(refused):len(refused)], loaderSettings...)
	}
	for _, s := range refused {
		if c.Sources[s] != FromDefault {
			p.Checks = append(p.Checks, Check{Name: s, Exit: ExitConfig,
				Detail: fmt.Sprintf("--%s is for a Python application, and %s serves a Go one", s, name()),
				Fix:    leaveUnset(s)})
			return
		}
	}
	p.Protocol = "go"
	if a.loadsPython() {
		// The interpreter the program's Python applications run on, and
		// the loop of their ASGI executors, are checked as m0serve's are.
		if !p.CheckPython() || !p.CheckLoop() {
			return
		}
	}
	p.Checks = append(p.Checks, Check{Name: "app", OK: true})
}

func (a *adapted) MaxWorkers() int {
	if m, ok := a.app.(interface{ MaxWorkers() int }); ok {
		return max(m.MaxWorkers(), 0)
	}
	return 0
}

func (a *adapted) MaxThreads() int {
	if m, ok := a.app.(interface{ MaxThreads() int }); ok {
		return max(m.MaxThreads(), 0)
	}
	return 0
}

func (a *adapted) Why(what string) string {
	if w, ok := a.app.(interface{ Why(what string) string }); ok {
		return w.Why(what)
	}
	return ""
}

func (a *adapted) Producer() Producer {
	if m, ok := a.app.(interface{ Producer() Producer }); ok {
		return m.Producer()
	}
	return nil
}

func (a *adapted) poolThreads(c *Config) int {
	if m, ok := a.app.(interface{ PoolThreads(*Config) int }); ok {
		return max(m.PoolThreads(c), 0)
	}
	return PoolThreads(c)
}

func (a *adapted) Banner(p *Plan) (string, string, string) {
	if b, ok := a.app.(interface {
		Banner(p *Plan) (name, protocol, mode string)
	}); ok {
		return b.Banner(p)
	}
	return name(), "go", fmt.Sprintf("blocking-threads=%d", a.poolThreads(p.Config))
}

// Make builds a loop's handler: the application's own for the loop, with
// the held streams under --realtime, and the pool's behind it.
func (a *adapted) Make(ctx Context) (*Loop, error) {
	n := a.poolThreads(ctx.Config)
	ctx.Threads = n
	l := &Loop{}
	ctx.loop = l
	h, err := a.app.Make(ctx)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("Make returned no handler for worker %d", ctx.Worker)
	}
	loop := h
	if ctx.Hub != nil && !l.holds {
		loop = realtime.Holds(ctx.Hub, HoldOptions(ctx.Config, ""))(h)
	}
	if n == 0 {
		l.Handler = loop
		return l, nil
	}
	threads := make([]http.Handler, n)
	for i := range threads {
		tc := ctx
		tc.Thread = i + 1
		if threads[i], err = a.app.Make(tc); err != nil {
			return nil, err
		}
		if threads[i] == nil {
			return nil, fmt.Errorf("Make returned no handler for worker %d, thread %d", ctx.Worker, i+1)
		}
	}
	ph, p := newPool(h, loop, threads, ctx.Hub != nil)
	l.Handler = ph
	l.Drain = append([]Shutdowner{p}, l.Drain...)
	return l, nil
}

// name is the program's, for the banner and the refusals.
func name() string { return filepath.Base(os.Args[0]) }
