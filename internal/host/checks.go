package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

	err error // as serving reports it
}

// pending names the settings whose features this build does not have yet:
// each is parsed and validated, and refused when it asks for anything but
// its default.
var pending = map[string]string{
	"workers":       "several worker processes",
	"threads":       "several accept loops (free-threaded CPython)",
	"spawn-workers": "spawned workers",
	"pg-listen":     "the PostgreSQL bus",
	"mount":         "mounted applications",
	"reload":        "reloading",
	"reload-dir":    "reloading",
}

// MaxReplayFrames is the most frames a worker journals.
const MaxReplayFrames = realtime.MaxReplayFrames

// ConfigChecks returns the checks of the configuration alone, in the
// order serving applies them.
func ConfigChecks(c *Config) []Check {
	var cs []Check
	add := func(name string, ok bool, detail, fix string) {
		ch := Check{Name: name, OK: ok}
		if !ok {
			ch.Detail, ch.Fix, ch.Exit = detail, fix, ExitConfig
		}
		cs = append(cs, ch)
	}
	add("port", c.Port >= 1 && c.Port <= 65535,
		fmt.Sprintf("port %d is outside 1-65535", c.Port),
		"pass --port or set M0_PORT to a port from 1 to 65535")
	add("replay-frames", c.ReplayFrames <= MaxReplayFrames,
		fmt.Sprintf("--replay-frames %d is more than %d", c.ReplayFrames, MaxReplayFrames),
		fmt.Sprintf("pass --replay-frames or set M0_REPLAY_FRAMES to at most %d", MaxReplayFrames))
	add("workers", c.Workers >= 1,
		fmt.Sprintf("%d workers", c.Workers), "pass --workers or set M0_WORKERS to 1 or more")
	add("threads", c.Threads >= 1,
		fmt.Sprintf("%d threads", c.Threads), "pass --threads or set M0_THREADS to 1 or more")
	add("threads-and-workers", !(c.Threads > 1 && c.Workers > 1),
		fmt.Sprintf("--threads %d beside --workers %d", c.Threads, c.Workers),
		"use one of --threads and --workers, not both")
	for _, s := range settings {
		what, ok := pending[s.name]
		if !ok || c.Sources[s.name] == FromDefault || s.isDefault(c) ||
			s.name == "replay-frames" && c.ReplayFrames > MaxReplayFrames { // refused above already
			continue
		}
		how := "--" + s.name
		if c.Sources[s.name] == FromEnv {
			how = s.env
		}
		add(s.name, false,
			fmt.Sprintf("%s=%s asks for %s, which this m0serve does not support yet", how, c.Values[s.name], what),
			"leave --"+s.name+unsetEnv(s)+" unset")
	}
	for _, e := range flaglessEnv {
		if v, ok := c.Env[e.name]; ok && v != e.def && e.set == nil {
			shown := v
			if strings.HasPrefix(e.name, "M0_GRANT_KEY") {
				shown = "(set)"
			}
			add(e.name, false,
				fmt.Sprintf("%s=%s is for %s, which this m0serve does not support yet", e.name, shown, e.feature),
				"unset "+e.name)
		}
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
	add("health-path", !(c.Metrics && c.HealthPath == observe.MetricsPath),
		fmt.Sprintf("--health-path %s is the path --metrics answers", c.HealthPath),
		"pass another --health-path")
	add("qos", c.QoS == "" || qosPermitted(c.QoS),
		fmt.Sprintf("--qos %s needs a nice level of %d, which this process may not take", c.QoS, qosLinux[c.QoS].nice),
		"run as root or with CAP_SYS_NICE (or a higher RLIMIT_NICE), or pass a class from default down")
	return cs
}

func unsetEnv(s setting) string {
	if s.env == "" {
		return ""
	}
	return " and " + s.env
}

// Plan is what serving would do with a configuration: its checks, in
// order, and what they found. The doctor prints it; serving acts on it.
type Plan struct {
	Config *Config
	Checks []Check
	Python *cpython.Interpreter // nil when none could be used
	App    *cpython.App         // nil without an application, or when it failed
	AppDir string               // the absolute --app-dir
	// EventLoop is the loop the ASGI executor runs ("uvloop" or
	// "asyncio"), or "" when no executor serves the application.
	EventLoop string
}

// NewPlan runs the checks serving applies, in order: the configuration,
// the interpreter, and, when the configuration names one and everything
// before passed, the application, which it imports.
func NewPlan(c *Config) *Plan {
	p := &Plan{Config: c, Checks: ConfigChecks(c)}
	p.AppDir, _ = filepath.Abs(c.AppDir)
	rt, err := boot.Python()
	if err != nil {
		p.fail("python", err)
	} else {
		in := rt.Interp
		p.Python = &in
		p.Checks = append(p.Checks, Check{Name: "python", OK: true})
	}
	if c.App == "" || p.Err() != nil {
		return p
	}
	app, err := boot.Load(c.App, c.AppDir, c.Protocol)
	if err != nil {
		p.fail("app", err)
		return p
	}
	p.App = app
	p.Checks = append(p.Checks, Check{Name: "app", OK: true})
	if c.Realtime && app.Protocol == "asgi" {
		p.Checks = append(p.Checks, Check{
			Name: "realtime", Exit: ExitConfig,
			Detail: "--realtime holds streams for WSGI views, and " + app.Spec + " is an ASGI application",
			Fix:    "leave --realtime unset: an ASGI application holds its streams and WebSockets itself",
		})
		return p
	}
	if app.Protocol == "asgi" && !c.ASGIBuffered() {
		p.checkLoop(rt)
	}
	return p
}

// checkLoop resolves the event loop the ASGI executor will run.
func (p *Plan) checkLoop(rt *cpython.Runtime) {
	have := false
	err := rt.Main(func(t cpython.Thread) error {
		s, err := t.Eval(`__import__("importlib.util").util.find_spec("uvloop") is not None`)
		have = s == "True"
		return err
	})
	switch want := p.Config.Loop; {
	case err != nil:
		p.fail("loop", &StartupError{Msg: "cannot look for uvloop: " + err.Error()})
		return
	case want == "uvloop" && !have:
		p.Checks = append(p.Checks, Check{
			Name: "loop", Exit: ExitConfig,
			Detail: "--loop uvloop, and uvloop is not installed in this interpreter",
			Fix:    "pip install uvloop into the application's environment, or pass --loop auto or asyncio",
		})
		return
	case want == "asyncio" || !have:
		p.EventLoop = "asyncio"
	default:
		p.EventLoop = "uvloop"
	}
	p.Checks = append(p.Checks, Check{Name: "loop", OK: true})
}

func (p *Plan) fail(name string, err error) {
	ch := Check{Name: name, Exit: ExitCode(err), Detail: err.Error(), err: err}
	var r *Refusal
	var s *StartupError
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
// *Refusal for exit 78, a *StartupError for exit 1.
func (p *Plan) Err() error {
	for _, ch := range p.Checks {
		switch {
		case ch.OK:
		case ch.err != nil:
			return ch.err
		case ch.Exit == ExitConfig:
			return &Refusal{Found: ch.Detail, Fix: ch.Fix}
		default:
			return &StartupError{Msg: ch.Detail}
		}
	}
	return nil
}
