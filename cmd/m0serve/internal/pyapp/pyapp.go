// Package pyapp is m0serve's application: the Python application the
// command line names, or the several it mounts under prefixes, each behind
// the bridge its protocol and the configuration choose.
package pyapp

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/cmd/m0serve/internal/mount"
	"github.com/m0serve/m0/host"
	"github.com/m0serve/m0/realtime"
)

// HoldSpec is the spec of a hold mount: --mount PREFIX=hold.
const HoldSpec = "hold"

// App is m0serve's application for the host. Check loads it; Make builds
// its handler.
type App struct {
	apps []*mounted // the positional application at "", then the mounts
	keys realtime.GrantKeys
}

// mounted is one application and the prefix it is served under: "" for
// the positional one, which claims every path no mount does.
type mounted struct {
	prefix, spec string
	app          *m0.App // nil for a hold mount
	eventLoop    string  // the ASGI executor's loop
}

func (m *mounted) protocol() string {
	if m.app == nil {
		return HoldSpec
	}
	return m.app.Protocol
}

// mode is how the mount runs: "pool" or "loop" for WSGI, "executor" or
// "buffered" for ASGI, "hold" for a hold mount.
func (m *mounted) mode(c *host.Config) string {
	if m.app == nil {
		return HoldSpec
	}
	return host.BridgeMode(c, m.app)
}

// MaxWorkers is any number: each worker imports the application afresh.
func (a *App) MaxWorkers() int { return 0 }

// MaxThreads is 1 on a GIL build: the loops of one process would share
// one interpreter, which runs one Python thread at a time. On a
// free-threaded build it is any number: each loop's pool threads run the
// application at once.
func (a *App) MaxThreads() int {
	if m0.FreeThreaded() {
		return 0
	}
	return 1
}

// Why says why the application runs under at most MaxThreads loops.
func (a *App) Why(what string) string {
	if what != "threads" {
		return ""
	}
	return "the loops of one process share one interpreter, which runs one Python thread at a time on a GIL build; " +
		"several need a free-threaded CPython (python3.13t or newer); use --workers N for N processes"
}

// Check runs the interpreter's check and imports every application: the
// positional one, then each mount in the order given.
func (a *App) Check(p *host.Plan) {
	c := p.Config
	if c.App == "" && len(c.Mounts) == 0 {
		if !c.Doctor {
			p.Fail("app", &host.UsageError{Msg: "no application given (usage: m0serve [flags] MODULE[:ATTR]; see m0serve --help)"})
		}
		if p.Err() != nil {
			return
		}
	}
	p.CheckPython()
	if p.Err() != nil || c.App == "" && len(c.Mounts) == 0 {
		return
	}
	if c.App == "" && c.Sources["protocol"] != host.FromDefault {
		p.Checks = append(p.Checks, host.Check{Name: "protocol", Exit: host.ExitConfig,
			Detail: "--protocol " + c.Protocol + " is the positional application's, and only mounts are given",
			Fix:    "leave --protocol unset: each mount detects its own protocol"})
		return
	}
	if c.App != "" {
		app, err := m0.LoadApp(c.App, &m0.LoadOptions{Dir: c.AppDir, Protocol: c.Protocol})
		if err != nil {
			p.Fail("app", err)
			return
		}
		p.App = app
		a.apps = append(a.apps, &mounted{spec: c.App, app: app})
		p.Checks = append(p.Checks, host.Check{Name: "app", OK: true})
	}
	if !a.checkMounts(p) {
		return
	}
	asgi := ""
	for _, m := range a.apps {
		if asgi == "" && m.protocol() == "asgi" {
			asgi = m.app.Spec
		}
	}
	if !p.CheckGIL(asgi) {
		return
	}
	var apps []*m0.App
	for _, m := range a.apps {
		if m.app != nil {
			apps = append(apps, m.app)
		}
	}
	if !p.CheckInterpreters(apps) {
		return
	}
	a.checkRealtime(p)
	if p.Err() != nil {
		return
	}
	for _, m := range a.apps {
		if m.app != nil && m.mode(c) == "executor" {
			if p.EventLoop == "" && !p.CheckLoop() {
				return
			}
			m.eventLoop = p.EventLoop
		}
	}
	a.checkPoolBounds(p)
	a.checkInverted(p)
}

// checkInverted refuses M0_INVERTED=1 but for one unmounted ASGI
// application on the executor: the inverted loop is that executor's.
func (a *App) checkInverted(p *host.Plan) {
	c := p.Config
	if !c.Inverted {
		return
	}
	ok := len(a.apps) == 1 && a.apps[0].prefix == "" && a.apps[0].app != nil && a.apps[0].mode(c) == "executor"
	ch := host.Check{Name: "inverted", OK: ok}
	if !ok {
		what := "mounts"
		if len(a.apps) == 1 && a.apps[0].app != nil {
			what = a.apps[0].app.Spec + ", a " + a.apps[0].protocol() + " application on the " + a.apps[0].mode(c)
		}
		ch.Exit = host.ExitConfig
		ch.Detail = "M0_INVERTED=1 serves one unmounted ASGI application on the executor, not " + what
		ch.Fix = "unset M0_INVERTED"
	}
	p.Checks = append(p.Checks, ch)
}

// checkPoolBounds refuses --max-queue-wait and --timeout where no
// application runs on a pool thread: an ASGI application on the event loop
// takes none, and its requests are not bounded by them.
func (a *App) checkPoolBounds(p *host.Plan) {
	c := p.Config
	pooled := false
	for _, m := range a.apps {
		pooled = pooled || (m.app != nil && m.mode(c) != "executor")
	}
	for _, b := range []struct {
		name string
		d    time.Duration
		fix  string
	}{
		{"max-queue-wait", c.MaxQueueWait, "bound it with --limit-concurrency"},
		{"timeout", c.Timeout, "bound its requests in the application (asyncio.timeout)"},
	} {
		switch {
		case b.d <= 0:
		case pooled:
			p.Checks = append(p.Checks, host.Check{Name: b.name, OK: true})
		default:
			p.Checks = append(p.Checks, host.Check{Name: b.name, Exit: host.ExitConfig,
				Detail: fmt.Sprintf("--%s %s, and no application here runs on a Python pool thread: an ASGI application runs on its event loop", b.name, b.d),
				Fix:    fmt.Sprintf("pass --blocking-threads N to run the ASGI application on a pool (the buffered path), %s, or leave --%s out", b.fix, b.name)})
		}
	}
}

// checkMounts imports each mount's application.
func (a *App) checkMounts(p *host.Plan) bool {
	c := p.Config
	seen := map[string]bool{}
	if c.App != "" {
		seen[""] = true
	}
	for _, v := range c.Mounts {
		prefix, spec, _ := strings.Cut(v, "=")
		prefix = strings.TrimRight(prefix, "/")
		if seen[prefix] {
			p.Checks = append(p.Checks, host.Check{Name: "mount", Exit: host.ExitConfig,
				Detail: fmt.Sprintf("--mount %s: %s is served already", v, cmp.Or(prefix, "/ (the positional application)")),
				Fix:    "give each mount a prefix of its own"})
			return false
		}
		if spec == HoldSpec && prefix == "" {
			p.Checks = append(p.Checks, host.Check{Name: "mount", Exit: host.ExitConfig,
				Detail: fmt.Sprintf("--mount %s: a hold mount answers its prefix alone, and / is every path", v),
				Fix:    "mount it under a prefix of its own, as --mount /streams=hold"})
			return false
		}
		seen[prefix] = true
		m := &mounted{prefix: prefix, spec: spec}
		report := host.MountReport{Prefix: cmp.Or(prefix, "/"), Spec: spec}
		if spec != HoldSpec {
			app, err := m0.LoadApp(spec, &m0.LoadOptions{Dir: c.AppDir})
			if err != nil {
				p.Mounts = append(p.Mounts, report)
				p.Fail("mount", mountErr(v, err))
				return false
			}
			m.app = app
		}
		a.apps = append(a.apps, m)
		report.Protocol, report.Mode = m.protocol(), m.mode(c)
		p.Mounts = append(p.Mounts, report)
	}
	if len(c.Mounts) > 0 {
		var protocols []string
		for _, m := range a.apps {
			if !slices.Contains(protocols, m.protocol()) {
				protocols = append(protocols, m.protocol())
			}
		}
		p.Protocol = strings.Join(protocols, "+")
		p.Checks = append(p.Checks, host.Check{Name: "mount", OK: true})
	}
	return true
}

// mountErr names the mount in an application's refusal or start-up error.
func mountErr(v string, err error) error {
	var r *m0.Refusal
	var s *m0.StartupError
	switch {
	case errors.As(err, &r):
		return &m0.Refusal{Found: "--mount " + v + ": " + r.Found, Fix: r.Fix}
	case errors.As(err, &s):
		return &m0.StartupError{Msg: "--mount " + v + ": " + s.Msg, Detail: s.Detail}
	}
	return err
}

// checkRealtime: --realtime holds streams for WSGI views and hold mounts,
// and a hold mount needs --realtime and a grant key.
func (a *App) checkRealtime(p *host.Plan) {
	c := p.Config
	refuse := func(detail, fix string) {
		p.Checks = append(p.Checks, host.Check{Name: "realtime", Exit: host.ExitConfig, Detail: detail, Fix: fix})
	}
	holds, wsgiApps := 0, 0
	var asgiSpec string
	for _, m := range a.apps {
		switch m.protocol() {
		case HoldSpec:
			holds++
		case "wsgi":
			wsgiApps++
		default:
			asgiSpec = m.app.Spec
		}
	}
	switch {
	case c.Realtime && wsgiApps == 0 && holds == 0:
		refuse("--realtime holds streams for WSGI views, and "+asgiSpec+" is an ASGI application",
			"leave --realtime unset: an ASGI application holds its streams and WebSockets itself")
		return
	case holds == 0 && c.GrantCookie != realtime.DefaultGrantCookie:
		p.Checks = append(p.Checks, host.Check{Name: "grant-cookie", Exit: host.ExitConfig,
			Detail: "M0_GRANT_COOKIE=" + c.GrantCookie + " names the session cookie hold mounts bind grants to, and there is none",
			Fix:    "unset M0_GRANT_COOKIE, or add --mount PREFIX=hold"})
		return
	case holds > 0 && !c.Realtime:
		refuse("--mount PREFIX=hold holds streams, and --realtime is not set",
			"pass --realtime")
		return
	case holds > 0:
		keys, err := host.GrantKeys(c)
		if err != nil {
			p.Fail("grant-key", err)
			return
		}
		a.keys = keys
	}
	if c.Realtime || holds > 0 {
		p.Checks = append(p.Checks, host.Check{Name: "realtime", OK: true})
	}
}

// Banner names the application, or the mounts, and how they run.
func (a *App) Banner(p *host.Plan) (name, protocol, mode string) {
	c := p.Config
	if len(c.Mounts) == 0 {
		m := a.apps[0]
		return m.app.Spec, m.app.Protocol, withInterpreters(c, loopMode(c, m))
	}
	var names, protocols, modes []string
	for _, m := range a.apps {
		spec := m.spec
		if m.app != nil {
			spec = m.app.Spec
		}
		names = append(names, cmp.Or(m.prefix, "/")+"="+spec)
		if !slices.Contains(protocols, m.protocol()) {
			protocols = append(protocols, m.protocol())
		}
		if mm := loopMode(c, m); !slices.Contains(modes, mm) && m.app != nil {
			modes = append(modes, mm)
		}
	}
	return strings.Join(names, ","), strings.Join(protocols, "+"), withInterpreters(c, strings.Join(modes, " "))
}

// loopMode is the banner's end for one application: its executor's loop,
// or its pool.
func loopMode(c *host.Config, m *mounted) string {
	if m.eventLoop != "" {
		loop := "pump"
		if c.Inverted {
			loop = "inverted"
		}
		return "loop=" + loop + " event-loop=" + m.eventLoop
	}
	threads, auto := c.PoolSize()
	s := fmt.Sprintf("blocking-threads=%d", threads)
	if auto {
		s += " (auto)"
	}
	return s
}

// withInterpreters is the banner's mode with --interpreters N, said once
// whatever runs in them.
func withInterpreters(c *host.Config, mode string) string {
	if c.Interpreters > 0 {
		mode += fmt.Sprintf(" interpreters=%d", c.Interpreters)
	}
	return mode
}

// Make builds the handler of the loop: each application behind its
// bridge, under its prefix, and the router of the prefixes when there are
// mounts.
func (a *App) Make(ctx host.Context) (http.Handler, error) {
	m0.PublishTo(ctx.Hub)
	var routes []mount.Route
	for _, m := range a.apps {
		var h http.Handler
		if m.app == nil {
			h = ctx.HoldMount(m.prefix, a.keys)
		} else {
			h = ctx.Bridge(m.app, m.prefix)
		}
		routes = append(routes, mount.Route{Prefix: cmp.Or(m.prefix, "/"), Handler: h})
	}
	if len(routes) == 1 && routes[0].Prefix == "/" {
		return routes[0].Handler, nil
	}
	r, err := mount.New(routes)
	if err != nil {
		return nil, err // checkMounts refused such prefixes already
	}
	return r, nil
}

// PoolThreads is none: the bridges run Python on pools of their own.
func (a *App) PoolThreads(*host.Config) int { return 0 }
