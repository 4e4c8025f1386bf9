// Package host serves a Go application the way m0serve serves a Python
// one: the same flags and M0_* variables, the same doctor, refusals, exit
// codes, limits, health path, metrics, access log, held streams and drain.
// The application supplies a factory; the host owns the listener, the
// loops, the signals and the drain.
//
//	func main() {
//		host.Main(app{})
//	}
//
// The host calls the application's Make once per accept loop (per worker,
// or per loop under --threads N) and once per pool thread behind each loop
// (--blocking-threads N), so that each builds a handler of its own. A
// handler that also serves fasthttp (ServeFastHTTP, as m0.FastHandler) is
// served by fasthttp; any other http.Handler by net/http.
package host

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/m0serve/m0/internal/boot"
	ihost "github.com/m0serve/m0/internal/host"
	"github.com/m0serve/m0/internal/pid1"
	"github.com/m0serve/m0/internal/stack"
	"github.com/m0serve/m0/realtime"
)

// Config is the resolved configuration: the command line over the M0_*
// variables over the defaults, as m0serve resolves it.
type Config = ihost.Config

// Context is what the host tells each Make: Worker and Workers count the
// accept loops (workers, or loops under --threads), Thread is 0 for a
// loop's handler and 1 to Threads for a pool thread's, Config is the
// resolved configuration, and Hub the process's channels (nil unless
// --realtime is set or the application has a producer). Its Ready and
// Drain methods hand the host the start-up steps and the drain of what
// Make built: an ASGI handler's lifespan, a bridge's Shutdown.
type Context = ihost.Context

// Shutdowner is what Context.Drain stops: every m0 handler is one.
type Shutdowner = ihost.Shutdowner

// Producer is work on a cadence, off the request path: Make once, on worker
// 0, then Step until the drain, each Step returning how long to wait before
// the next. Its Publisher reaches every loop's held streams.
type Producer = ihost.Producer

// Publisher is a producer's way out: Publish(channel, id, frame) with an id
// from NextID, the shared counter; Publish returns false for a frame a
// channel refused.
type Publisher = ihost.Publisher

// GrantKeys returns the keys of M0_GRANT_KEY, M0_GRANT_KEY_PREV and
// M0_GRANT_COOKIE, for a hold mount (realtime.Hub.HoldMount), or the
// refusal of a key that is missing or shorter than realtime.MinGrantKey.
func GrantKeys(c *Config) (realtime.GrantKeys, error) { return ihost.GrantKeys(c) }

// Application is what a Go program hands the host: a factory of handlers.
// Make returning an error ends the process with exit 78 and its message;
// it is not retried.
//
// An Application may also have these methods, each optional:
//
//	MaxWorkers() int    // at most this many workers (0: any); 1 for state held in the handler
//	MaxThreads() int    // at most this many loops under --threads (0: any)
//	Producer() Producer // work on a cadence, publishing to held streams
//	LoadsPython() bool  // true: Make loads Python applications (m0.LoadApp), so --app-dir, --reload,
//	                    // --loop and --qos apply, and the interpreter is checked first
type Application interface {
	Make(ctx Context) (http.Handler, error)
}

// ParseFlags resolves the command line and the M0_* variables as m0serve
// does, for a program that prints its own address before it serves. On
// --help it prints the flags and exits 0; on a command line it cannot read
// it prints why (the doctor's JSON under --doctor) and exits 2.
func ParseFlags() *Config {
	cfg, code, done := ihost.ParseArgs(os.Args[1:], os.Getenv)
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
	return ihost.Serve(cfg, os.Getenv, &goApp{app: app}, stack.Wrap)
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

// goApp is a Go Application as the host serves it.
type goApp struct {
	app Application
}

// pythonSettings are m0serve's settings for the Python application it
// loads, which a Go program refuses; loaderSettings it takes only when it
// loads Python applications itself (LoadsPython), through ctx.Config.
var (
	pythonSettings = []string{"protocol", "mount"}
	loaderSettings = []string{"app-dir", "loop", "qos", "reload", "reload-dir"}
)

func (a *goApp) loadsPython() bool {
	l, ok := a.app.(interface{ LoadsPython() bool })
	return ok && l.LoadsPython()
}

func (a *goApp) Check(p *ihost.Plan) {
	c := p.Config
	if c.App != "" {
		p.Fail("app", &ihost.UsageError{Msg: fmt.Sprintf("%s serves its own application and takes no MODULE[:ATTR] (%s was given)",
			name(), c.App)})
		return
	}
	refused := pythonSettings
	if !a.loadsPython() {
		refused = append(refused[:len(refused):len(refused)], loaderSettings...)
	}
	for _, s := range refused {
		if c.Sources[s] != ihost.FromDefault {
			p.Checks = append(p.Checks, ihost.Check{Name: s, Exit: ihost.ExitConfig,
				Detail: fmt.Sprintf("--%s is for a Python application, and %s serves a Go one", s, name()),
				Fix:    ihost.LeaveUnset(s)})
			return
		}
	}
	p.Protocol = "go"
	if a.loadsPython() {
		// The interpreter the program's Python applications run on, and
		// the loop of their ASGI executors, are checked as m0serve's are.
		rt, err := boot.Python()
		if err != nil {
			p.Fail("python", err)
			return
		}
		in := rt.Interp
		p.Python = &in
		p.Checks = append(p.Checks, ihost.Check{Name: "python", OK: true})
		if !ihost.CheckLoop(p, rt) {
			return
		}
	}
	p.Checks = append(p.Checks, ihost.Check{Name: "app", OK: true})
}

func (a *goApp) MaxWorkers() int {
	if m, ok := a.app.(interface{ MaxWorkers() int }); ok {
		return max(m.MaxWorkers(), 0)
	}
	return 0
}

func (a *goApp) MaxThreads() int {
	if m, ok := a.app.(interface{ MaxThreads() int }); ok {
		return max(m.MaxThreads(), 0)
	}
	return 0
}

func (a *goApp) Producer() Producer {
	if m, ok := a.app.(interface{ Producer() Producer }); ok {
		return m.Producer()
	}
	return nil
}

// PoolThreads is the pool behind each loop of a Go application: the
// --blocking-threads given, or none when it is left at its default (a Go
// handler runs on the goroutines of its loop unless a pool is asked for).
// ServeStrict serves srv on ln with m0serve's strict reading of requests
// (docs/reliability.md): a Go program's own http.Server refuses what
// m0serve refuses (request smuggling shapes, obsolete folding, bare LF,
// versions other than 1.x, oversized heads) before its handler sees it.
// It sets srv's Handler and ConnContext to wrappers of theirs.
func ServeStrict(srv *http.Server, ln net.Listener) error { return ihost.ServeStrict(srv, ln) }

func PoolThreads(c *Config) int { return ihost.GoPoolThreads(c) }

func (a *goApp) Banner(p *ihost.Plan) (string, string, string) {
	return name(), "go", fmt.Sprintf("blocking-threads=%d", PoolThreads(p.Config))
}

// Make builds a loop's handler: the application's own for the loop, with
// the held streams under --realtime, and the pool's behind it.
func (a *goApp) Make(ctx Context) (*ihost.Loop, error) {
	n := PoolThreads(ctx.Config)
	ctx.Threads = n
	l := &ihost.Loop{}
	ctx = ihost.WithLoop(ctx, l)
	h, err := a.app.Make(ctx)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("Make returned no handler for worker %d", ctx.Worker)
	}
	loop := h
	if ctx.Hub != nil {
		loop = realtime.Holds(ctx.Hub, &realtime.HoldOptions{MaxMessage: ctx.Config.MaxBody,
			KeepHijackedConns: ihost.KeepsHijackedConns})(h)
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
	l.Drain = append([]ihost.Shutdowner{p}, l.Drain...)
	return l, nil
}

// name is the program's, for the banner and the refusals.
func name() string { return filepath.Base(os.Args[0]) }
