package host

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/m0serve/m0/internal/version"
	"github.com/m0serve/m0/realtime/pgbus"

	"github.com/m0serve/m0/realtime"
	"golang.org/x/sys/unix"
)

// secretEnv are variables the doctor reports only as set or unset.
var secretEnv = []string{"M0_GRANT_KEY", "M0_GRANT_KEY_PREV"}

// plainEnv are variables without a flag that the doctor reports as they are.
var plainEnv = []string{"M0_PYTHON_LIBRARY", "MOJO_PYTHON_LIBRARY", "M0_SSE_HEARTBEAT_MS", "M0_APP_TICK_MS",
	"M0_STREAM_KEEPALIVE_S", "M0_GRANT_COOKIE", "M0_INVERTED", "M0_HANDOFF"}

// doctorReport is what the doctor prints, as one JSON object.
type doctorReport struct {
	// Build is what `m0serve --version` prints: the version, the commit,
	// the Go version and the platform.
	Build    map[string]string         `json:"build"`
	Platform map[string]any            `json:"platform"`
	Python   any                       `json:"python"`
	App      any                       `json:"app"`
	Config   map[string]map[string]any `json:"config"`
	Env      map[string]string         `json:"env"`
	Notes    []string                  `json:"notes"`
	Topology map[string]any            `json:"topology"`
	Realtime map[string]any            `json:"realtime"`
	// Declares is what the application declares: max_workers and
	// max_threads (0: any number).
	Declares map[string]int `json:"declares"`
	// Mounts are the applications mounted under prefixes, in order.
	Mounts []MountReport `json:"mounts"`
	Checks []Check       `json:"checks"`
	Exit   int           `json:"exit"`
}

// newReport describes a plan. getenv is usually os.Getenv.
func newReport(p *Plan, getenv func(string) string) *doctorReport {
	c := p.Config
	r := &doctorReport{
		Build:    version.Build(),
		Platform: platform(),
		Config:   map[string]map[string]any{},
		Env:      map[string]string{},
		Checks:   p.Checks,
		Notes:    append([]string{}, c.Notes...),
		Exit:     codeOf(p.Err()),
		Declares: map[string]int{"max_workers": p.MaxWorkers, "max_threads": p.MaxThreads},
		Mounts:   append([]MountReport{}, p.Mounts...),
	}
	if p.python != nil {
		in := p.python
		py := map[string]any{
			"version": in.Version, "executable": in.Executable, "library": in.Library,
			"library_from": in.LibraryFrom,
			"prefix":       in.Prefix, "base_prefix": in.BasePrefix, "virtualenv": nilIfEmpty(in.Virtualenv()),
			"site_packages": in.SitePackage, "shared": in.Shared, "gil_disabled": in.GILDisabled,
			"free_threaded": in.GILDisabled,
		}
		if p.gil != nil {
			// Whether the GIL is on now, once the applications are
			// imported, and what turned it back on.
			py["gil_enabled"], py["gil_enabled_by"] = p.gil.Enabled, nilIfEmpty(p.gil.By)
		}
		r.Python = py
	}
	if c.App != "" {
		app := map[string]any{"spec": c.App, "app_dir": p.AppDir, "resolved": nil, "protocol": nil}
		if p.App != nil {
			app["resolved"], app["protocol"] = p.App.Spec, p.App.Protocol
		}
		r.App = app
	}
	for _, s := range settings {
		entry := map[string]any{"value": c.Values[s.name], "source": c.Sources[s.name]}
		if s.env != "" {
			entry["env"] = s.env
		}
		r.Config[s.name] = entry
	}
	for _, k := range plainEnv {
		if v := getenv(k); v != "" {
			r.Env[k] = v
		}
	}
	for _, k := range secretEnv {
		r.Env[k] = "unset"
		if getenv(k) != "" {
			r.Env[k] = "set"
		}
	}
	r.Realtime = map[string]any{
		"enabled":       c.Realtime,
		"replay_frames": c.ReplayFrames,
		"heartbeat_ms":  c.SSEHeartbeat.Milliseconds(),
		"keepalive_s":   int64(c.StreamKeepAlive.Seconds()),
		"message_path":  realtime.MessagePath,
		"max_frame":     realtime.MaxFrame,
	}
	threads, auto := c.PoolSize()
	frontEnd := "fasthttp"
	protocol := "wsgi"
	if p.App != nil {
		protocol = p.App.Protocol
	}
	if p.Protocol != "" {
		protocol = p.Protocol
	}
	var frontEndOf any = frontEnd
	if protocol == "go" {
		// A Go program's handler chooses: fasthttp when it has
		// ServeFastHTTP, net/http otherwise; only Make knows.
		threads, auto, frontEndOf = p.goPool, false, nil
	}
	r.Topology = map[string]any{
		"mode":                  "single",
		"workers":               c.Workers,
		"threads":               c.Threads,
		"blocking_threads":      threads,
		"blocking_threads_auto": auto,
		"interpreters":          c.Interpreters,
		"pool":                  threads > 0,
		"streaming":             threads > 0,
		"loop":                  "n/a",
		"protocol":              protocol,
		"front_end":             frontEndOf,
	}
	// Where it listens: the places asked for, or systemd's sockets.
	var binds []string
	if sys, err := activated(); err == nil && len(sys) > 0 {
		for _, l := range sys {
			binds = append(binds, l.URL())
		}
		r.Topology["socket_activation"] = true
	} else {
		for _, s := range c.Places() {
			binds = append(binds, s.String())
		}
		r.Topology["socket_activation"] = false
	}
	r.Topology["listen"], r.Topology["binds"] = binds[0], binds
	// The service manager's NOTIFY_SOCKET, taken from the environment.
	r.Topology["sd_notify"] = notifier() != nil
	r.Topology["watchdog_ms"] = notifier().WatchdogEvery().Milliseconds() * 2
	// Under a supervisor: the workers, what carries frames between them,
	// and where event ids come from.
	ids, bus := "process counter", "none"
	if c.Realtime {
		ids, bus = "shared memory page", "none (one process)"
	}
	if supervised(c) {
		r.Topology["mode"] = "prefork"
		ids, bus = "shared memory page", "unix datagram mesh"
		if c.Workers == 1 {
			bus = "none (one worker)"
		}
	}
	r.Topology["supervisor"] = supervised(c)
	r.Topology["spawn_workers"] = c.SpawnWorkers
	r.Topology["reload"] = c.Reload
	r.Topology["handoff"] = supervised(c) && c.Workers > 1 && !c.NoHandoff
	if c.PGListen != "" {
		ids, bus = "postgresql sequence m0.frame_seq", "postgresql NOTIFY "+pgbus.Channel
	}
	r.Topology["bus"] = bus
	r.Topology["ids"] = ids
	if strings.Contains(protocol, "asgi") { // the application's, or a mount's
		// The executor: one event loop beside Go's (the seed's "pump"); or,
		// under --blocking-threads N > 0, the buffered path, with no loop.
		// A pool is the WSGI mounts', beside ASGI ones.
		alone := !strings.Contains(protocol, "wsgi") // no WSGI pool beside it
		r.Topology["asgi_path"] = "buffered"
		if !c.ASGIBuffered() {
			r.Topology["asgi_path"] = "executor"
			r.Topology["loop"] = "pump"
			if c.Inverted {
				r.Topology["loop"] = "inverted"
			}
			r.Topology["event_loop"] = nilIfEmpty(p.EventLoop)
			r.Topology["eager_tasks"] = p.python != nil && p.python.AtLeast(3, 12)
			if alone {
				r.Topology["pool"] = false
				r.Topology["streaming"] = true
				r.Topology["blocking_threads"] = 0
				r.Topology["blocking_threads_auto"] = false
			}
		} else if alone {
			r.Topology["streaming"] = false // bodies are buffered both ways
		}
	}
	return r
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func platform() map[string]any {
	p := map[string]any{"os": runtime.GOOS, "arch": runtime.GOARCH, "cpus": runtime.NumCPU(), "go": runtime.Version()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		p["kernel"] = unix.ByteSliceToString(u.Release[:])
	}
	p["pid"] = os.Getpid()
	return p
}

// Print writes the report as the last line of w: one JSON object.
func (r *doctorReport) Print(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// wantsDoctor reports whether a command line that could not be parsed
// asked for the doctor, so that its answer is still the JSON.
func wantsDoctor(args []string) bool {
	for _, a := range args {
		name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "doctor" && value != "false" && value != "0" {
			return true
		}
	}
	return false
}

// usageReport is the doctor's report for a command line that could not be
// read: one failed check, exit 2.
func usageReport(err error) *doctorReport {
	return &doctorReport{
		Build:    version.Build(),
		Platform: platform(),
		Config:   map[string]map[string]any{},
		Env:      map[string]string{},
		Topology: map[string]any{},
		Checks:   []Check{{Name: "arguments", Detail: err.Error(), Fix: "see m0serve --help", Exit: ExitUsage}},
		Notes:    []string{},
		Declares: map[string]int{},
		Mounts:   []MountReport{},
		Exit:     ExitUsage,
	}
}
