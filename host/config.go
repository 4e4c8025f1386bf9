package host

import (
	"flag"
	"fmt"
	"github.com/m0serve/m0/internal/front"
	"io"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/m0serve/m0/internal/wire"
	"github.com/m0serve/m0/realtime"
	"github.com/m0serve/m0/realtime/pgbus"
	"github.com/m0serve/m0/static"
)

// Source says where a configuration value came from.
type Source string

// The sources of a value, strongest first.
const (
	FromFlag    Source = "flag"
	FromEnv     Source = "env"
	FromDefault Source = "default"
)

// Config is the resolved configuration of a server: the command line over
// the M0_* variables over the defaults.
type Config struct {
	App     string // MODULE[:ATTR]; empty for none
	AppDir  string // prepended to sys.path
	Doctor  bool   // print the resolved configuration and the checks; bind nothing
	Host    string
	Port    int
	Workers int // processes
	Threads int // accept loops in one process (free-threaded CPython)
	// BlockingThreads is the Python thread pool: -1 means min(cores, 8)
	// (wire.AutoThreads), 0 no pool, as the bridges' Options.Threads.
	BlockingThreads      int
	Protocol             string // "", "wsgi" or "asgi"
	Loop                 string // the ASGI event loop: "auto", "uvloop" or "asyncio"
	AccessLog            bool
	QoS                  string // the scheduling class of the Python threads
	SpawnWorkers         bool
	MaxBody              int64         // bytes; 0 none
	BodyTimeout          time.Duration // 0: never
	IdleTimeout          time.Duration // 0: never
	MaxKeepaliveRequests int           // 0: never
	ReplayFrames         int
	PGListen             string
	HealthPath           string
	Metrics              bool
	Realtime             bool
	Reload               bool
	ReloadDirs           []string
	Mounts               []string // PREFIX=SPEC
	Static               []string // PREFIX=DIR
	StaticCacheControl   string
	StaticHeaders        []string // "Name: value"

	// Sources holds where each setting came from, by flag name.
	Sources map[string]Source
	// Values holds each setting as given or defaulted, by flag name.
	Values map[string]string
	// Notes are startup lines about variables that were ignored.
	Notes []string
	// Env holds the M0_* variables that have no flag, as set.
	Env map[string]string
	// SSEHeartbeat is how long a held stream may be idle before it is sent
	// a comment or a ping (M0_SSE_HEARTBEAT_MS); 0 sends none.
	SSEHeartbeat time.Duration
	// StreamKeepAlive is the TCP keepalive of held sockets
	// (M0_STREAM_KEEPALIVE_S); 0 leaves them as they are.
	StreamKeepAlive time.Duration
	// GrantKey and GrantKeyPrev sign and verify the grants of hold mounts
	// (M0_GRANT_KEY, M0_GRANT_KEY_PREV); GrantCookie names the session
	// cookie a grant is bound to (M0_GRANT_COOKIE).
	GrantKey, GrantKeyPrev, GrantCookie string
	// NoHandoff keeps every connection on the worker that accepted it
	// (M0_HANDOFF=0), to measure what the handoff does.
	NoHandoff bool
	// AppTick is the wait between a producer's steps, in place of what
	// its Step returns (M0_APP_TICK_MS); 0 leaves it to the producer.
	AppTick time.Duration
}

// GrantKeys returns the keys hold mounts verify grants with, or the
// refusal of a key that is missing or too short.
func GrantKeys(c *Config) (realtime.GrantKeys, error) {
	k := realtime.GrantKeys{Key: []byte(c.GrantKey), Cookie: c.GrantCookie}
	if c.GrantKeyPrev != "" {
		k.Prev = []byte(c.GrantKeyPrev)
	}
	switch {
	case c.GrantKey == "" && c.GrantKeyPrev != "":
		return k, &Refusal{Found: "M0_GRANT_KEY_PREV is set, and M0_GRANT_KEY is not",
			Fix: "set M0_GRANT_KEY to the key grants are signed with now, or unset M0_GRANT_KEY_PREV"}
	case c.GrantKey == "":
		return k, &Refusal{Found: "a hold mount verifies grants, and M0_GRANT_KEY is not set",
			Fix: fmt.Sprintf("set M0_GRANT_KEY to a secret of %d bytes or more, the one the application signs with", realtime.MinGrantKey)}
	case len(k.Key) < realtime.MinGrantKey:
		return k, &Refusal{Found: fmt.Sprintf("M0_GRANT_KEY is %d bytes", len(k.Key)),
			Fix: fmt.Sprintf("set M0_GRANT_KEY to a secret of %d bytes or more", realtime.MinGrantKey)}
	case k.Prev != nil && len(k.Prev) < realtime.MinGrantKey:
		return k, &Refusal{Found: fmt.Sprintf("M0_GRANT_KEY_PREV is %d bytes", len(k.Prev)),
			Fix: fmt.Sprintf("set M0_GRANT_KEY_PREV to the previous key, of %d bytes or more, or unset it", realtime.MinGrantKey)}
	}
	return k, nil
}

// flaglessEnv are the variables without a flag: each one's default, the
// feature it belongs to, and how it is read; one without a reader belongs
// to a feature this build does not have, and is refused when set to
// anything but its default.
var flaglessEnv = []struct {
	name, def, feature string
	set                func(c *Config, v string) error
}{
	{"M0_SSE_HEARTBEAT_MS", "15000", "held streams (M0-Hold)", func(c *Config, v string) error {
		n, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return fmt.Errorf("want a whole number of milliseconds, not %q", v)
		}
		c.SSEHeartbeat = time.Duration(n) * time.Millisecond
		return nil
	}},
	{"M0_STREAM_KEEPALIVE_S", "15", "held streams (M0-Hold)", func(c *Config, v string) error {
		n, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return fmt.Errorf("want a whole number of seconds, not %q", v)
		}
		c.StreamKeepAlive = time.Duration(n) * time.Second
		return nil
	}},
	{"M0_APP_TICK_MS", "", "producers", func(c *Config, v string) error {
		if v == "" {
			c.AppTick = 0
			return nil
		}
		n, err := strconv.ParseUint(v, 10, 31)
		if err != nil || n == 0 {
			return fmt.Errorf("want a whole number of milliseconds above 0, not %q", v)
		}
		c.AppTick = time.Duration(n) * time.Millisecond
		return nil
	}},
	{"M0_GRANT_KEY", "", "grants (--mount PREFIX=hold)", func(c *Config, v string) error {
		c.GrantKey = v
		return nil
	}},
	{"M0_GRANT_KEY_PREV", "", "grants (--mount PREFIX=hold)", func(c *Config, v string) error {
		c.GrantKeyPrev = v
		return nil
	}},
	{"M0_GRANT_COOKIE", "sessionid", "grants (--mount PREFIX=hold)", func(c *Config, v string) error {
		if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) }) {
			return fmt.Errorf("want a cookie name, not %q", v)
		}
		c.GrantCookie = v
		return nil
	}},
	{"M0_INVERTED", "0", "the inverted ASGI loop", nil},
	{"M0_HANDOFF", "1", "--workers", func(c *Config, v string) error {
		switch v {
		case "1":
			c.NoHandoff = false
		case "0":
			c.NoHandoff = true
		default:
			return fmt.Errorf("want 1 or 0, not %q", v)
		}
		return nil
	}},
}

// PoolSize returns the number of Python threads the configuration resolves
// to, and whether it was chosen automatically.
func (c *Config) PoolSize() (n int, auto bool) {
	return wire.PoolSize(c.BlockingThreads), c.BlockingThreads < 0
}

// limits returns the request limits of the configuration.
func (c *Config) limits() front.Limits {
	return front.Limits{
		MaxBody:              c.MaxBody,
		BodyTimeout:          c.BodyTimeout,
		IdleTimeout:          c.IdleTimeout,
		MaxKeepaliveRequests: c.MaxKeepaliveRequests,
	}
}

// StaticDir is one --static PREFIX=DIR.
type StaticDir struct{ Prefix, Dir string }

// StaticDirs returns the --static settings, in order.
func (c *Config) StaticDirs() []StaticDir {
	var out []StaticDir
	for _, v := range c.Static {
		prefix, dir, _ := strings.Cut(v, "=")
		out = append(out, StaticDir{prefix, dir})
	}
	return out
}

// ASGIBuffered reports whether an ASGI application runs on the buffered
// path (a pool of --blocking-threads N, N > 0, each request run to its end
// with its body buffered) rather than on the executor's event loop.
func (c *Config) ASGIBuffered() bool { return c.BlockingThreads > 0 }

// setting is one flag and its variable.
type setting struct {
	name  string // the flag, without dashes
	env   string // its M0_* variable, if it has one
	def   string // the default, as a flag would spell it
	arg   string // what the value is, for --help; "" for a switch
	multi bool   // repeatable
	usage string
	set   func(c *Config, v string) error
}

// qosClasses are the values of --qos; see docs/configuration.md.
var qosClasses = []string{"user-interactive", "user-initiated", "default", "utility", "background"}

var settings = []setting{
	{name: "host", env: "M0_HOST", def: "0.0.0.0", arg: "ADDR", usage: "address to listen on (:: for IPv6 and IPv4, ::1 or [::1] for the IPv6 loopback)", set: func(c *Config, v string) error {
		h := strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
		if h != "localhost" && net.ParseIP(h) == nil {
			return fmt.Errorf("not an IP address: %q", v)
		}
		c.Host = h
		return nil
	}},
	{name: "port", env: "M0_PORT", def: "8000", arg: "PORT", usage: "TCP port, 1-65535", set: func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not a port number: %q", v)
		}
		c.Port = n
		return nil
	}},
	{name: "app-dir", def: ".", arg: "DIR", usage: "directory put first on sys.path", set: func(c *Config, v string) error {
		c.AppDir = v
		return nil
	}},
	{name: "protocol", def: "auto", arg: "wsgi|asgi", usage: "the application's protocol (auto: detected)", set: func(c *Config, v string) error {
		switch v {
		case "auto":
			c.Protocol = ""
		case "wsgi", "asgi":
			c.Protocol = v
		default:
			return fmt.Errorf("want wsgi, asgi or auto, not %q", v)
		}
		return nil
	}},
	{name: "loop", env: "M0_LOOP", def: "auto", arg: "auto|uvloop|asyncio", usage: "the ASGI event loop (auto: uvloop when installed)", set: func(c *Config, v string) error {
		switch v {
		case "auto", "uvloop", "asyncio":
			c.Loop = v
		default:
			return fmt.Errorf("want auto, uvloop or asyncio, not %q", v)
		}
		return nil
	}},
	{name: "workers", env: "M0_WORKERS", def: "1", arg: "N", usage: "worker processes", set: setCount(func(c *Config) *int { return &c.Workers }, 0)},
	{name: "threads", env: "M0_THREADS", def: "1", arg: "N", usage: "accept loops in one process (free-threaded CPython)", set: setCount(func(c *Config) *int { return &c.Threads }, 0)},
	{name: "blocking-threads", env: "M0_BLOCKING_THREADS", def: "auto", arg: "N", usage: "Python threads running the application (0: one thread, no pool; auto: min(cores, 8))", set: func(c *Config, v string) error {
		if v == "auto" {
			c.BlockingThreads = -1
			return nil
		}
		return setCount(func(c *Config) *int { return &c.BlockingThreads }, 0)(c, v)
	}},
	{name: "spawn-workers", env: "M0_SPAWN_WORKERS", def: "false", usage: "exec each worker afresh", set: setBool(func(c *Config) *bool { return &c.SpawnWorkers })},
	{name: "qos", env: "M0_QOS", def: "default", arg: "CLASS", usage: "scheduling class of the Python threads: " + strings.Join(qosClasses, ", "), set: func(c *Config, v string) error {
		for _, q := range qosClasses {
			if v == q {
				c.QoS = v
				return nil
			}
		}
		return fmt.Errorf("want one of %s, not %q", strings.Join(qosClasses, ", "), v)
	}},
	{name: "max-body", env: "M0_MAX_BODY", def: wire.FormatSize(wire.DefaultMaxBody), arg: "SIZE", usage: "request body cap (512k, 4m, 64m, 1g; 0: none); over it 413", set: func(c *Config, v string) error {
		n, err := ParseSize(v)
		c.MaxBody = n
		return err
	}},
	{name: "body-timeout", env: "M0_BODY_TIMEOUT", def: "30", arg: "SECONDS", usage: "a body still arriving this long after its headers gets 408 (0: never)", set: setDuration(func(c *Config) *time.Duration { return &c.BodyTimeout })},
	{name: "idle-timeout", def: "60", arg: "SECONDS", usage: "close idle keep-alive connections, and responses the client stops reading (0: never)", set: setDuration(func(c *Config) *time.Duration { return &c.IdleTimeout })},
	{name: "max-keepalive-requests", env: "M0_MAX_KEEPALIVE_REQUESTS", def: "0", arg: "N", usage: "close a connection after N requests (0: never)", set: setCount(func(c *Config) *int { return &c.MaxKeepaliveRequests }, 0)},
	{name: "access-log", env: "M0_ACCESS_LOG", def: "false", usage: "one JSON line per response on stdout", set: setBool(func(c *Config) *bool { return &c.AccessLog })},
	{name: "health-path", def: "", arg: "PATH", usage: "answer a liveness JSON at PATH, before Python", set: func(c *Config, v string) error {
		if v != "" && !strings.HasPrefix(v, "/") {
			return fmt.Errorf("a path starts with /, not %q", v)
		}
		c.HealthPath = v
		return nil
	}},
	{name: "metrics", def: "false", usage: "Prometheus exposition at /__metrics", set: setBool(func(c *Config) *bool { return &c.Metrics })},
	{name: "replay-frames", env: "M0_REPLAY_FRAMES", def: "64", arg: "N", usage: "frames each worker journals for Last-Event-ID replay (0-4096)", set: setCount(func(c *Config) *int { return &c.ReplayFrames }, 0)},
	{name: "pg-listen", env: "M0_PG_LISTEN", def: "", arg: "DSN", usage: "PostgreSQL for the bus and event ids across machines", set: func(c *Config, v string) error {
		c.PGListen = v
		return nil
	}},
	{name: "realtime", def: "false", usage: "sync views hold SSE streams and WebSockets with M0-Hold", set: setBool(func(c *Config) *bool { return &c.Realtime })},
	{name: "mount", multi: true, arg: "PREFIX=SPEC", usage: "serve another application under PREFIX (repeatable)", set: func(c *Config, v string) error {
		if _, err := splitPrefix(v); err != nil {
			return err
		}
		c.Mounts = append(c.Mounts, v)
		return nil
	}},
	{name: "static", multi: true, arg: "PREFIX=DIR", usage: "serve files from DIR under PREFIX, falling through to the application (repeatable)", set: func(c *Config, v string) error {
		if _, err := splitPrefix(v); err != nil {
			return err
		}
		c.Static = append(c.Static, v)
		return nil
	}},
	{name: "static-cache-control", def: "", arg: "VALUE", usage: "Cache-Control of static successes", set: func(c *Config, v string) error {
		if strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("a header value holds no line break")
		}
		c.StaticCacheControl = v
		return nil
	}},
	{name: "static-header", multi: true, arg: "'NAME: VALUE'", usage: "a header on every static response (repeatable)", set: func(c *Config, v string) error {
		if _, err := static.ParseHeader(v); err != nil {
			return err
		}
		c.StaticHeaders = append(c.StaticHeaders, v)
		return nil
	}},
	{name: "reload", def: "false", usage: "restart workers when a watched .py file changes (development)", set: setBool(func(c *Config) *bool { return &c.Reload })},
	{name: "reload-dir", multi: true, arg: "DIR", usage: "a directory --reload watches (repeatable; default the app dir)", set: func(c *Config, v string) error {
		c.ReloadDirs = append(c.ReloadDirs, v)
		return nil
	}},
	{name: "doctor", def: "false", usage: "print the resolved configuration and the checks as JSON; bind nothing", set: setBool(func(c *Config) *bool { return &c.Doctor })},
}

func setCount(field func(*Config) *int, least int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < least {
			return fmt.Errorf("want a whole number from %d, not %q", least, v)
		}
		*field(c) = n
		return nil
	}
}

func setBool(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		switch strings.ToLower(v) {
		case "1", "true", "yes", "on":
			*field(c) = true
		case "0", "false", "no", "off":
			*field(c) = false
		default:
			return fmt.Errorf("want 1 or 0, not %q", v)
		}
		return nil
	}
}

func setDuration(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := ParseDuration(v)
		*field(c) = d
		return err
	}
}

func splitPrefix(v string) (string, error) {
	prefix, rest, ok := strings.Cut(v, "=")
	if !ok || !strings.HasPrefix(prefix, "/") || rest == "" {
		return "", fmt.Errorf("want PREFIX=VALUE with PREFIX starting with /, not %q", v)
	}
	return prefix, nil
}

// ParseSize reads a size in bytes: a whole number, optionally followed by
// k, m or g (powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	shift := 0
	switch {
	case strings.HasSuffix(t, "k"):
		shift = 10
	case strings.HasSuffix(t, "m"):
		shift = 20
	case strings.HasSuffix(t, "g"):
		shift = 30
	}
	if shift > 0 {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || t == "" || t[0] == '+' || n > (1<<62)>>shift {
		return 0, fmt.Errorf("not a size such as 512k, 4m or 1g: %q", s)
	}
	return n << shift, nil
}

// ParseDuration reads a duration: a number of seconds ("30", "0.5"), or
// a Go duration with its unit ("500ms", "2m").
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(t, 64); err == nil && t != "" && t[0] != '+' {
		if f < 0 || f > 1e9 || f != f {
			return 0, fmt.Errorf("not a number of seconds from 0: %q", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < 0 || strings.ContainsAny(t, "+") {
		return 0, fmt.Errorf("not a number of seconds such as 30: %q", s)
	}
	return d, nil
}

// Parse reads the command line and the environment (getenv, usually
// os.Getenv) into a Config: a flag beats its variable, which beats the
// default. Flags are strict: a bad value is a *UsageError. Variables are
// lenient: a bad value is replaced by the default and noted in Notes.
// Whether the result can run is for Checks to say.
func Parse(args []string, getenv func(string) string) (*Config, error) {
	c := &Config{Sources: map[string]Source{}, Values: map[string]string{}, Env: map[string]string{}}
	for _, e := range flaglessEnv {
		v := getenv(e.name)
		if v != "" {
			c.Env[e.name] = v
		}
		if e.set == nil {
			continue
		}
		if v != "" {
			if err := e.set(c, v); err == nil {
				continue
			} else {
				using := "using the default, " + e.def
				if e.def == "" {
					using = "leaving it unset"
				}
				c.Notes = append(c.Notes, fmt.Sprintf("m0serve: ignored %s=%s (%v); %s", e.name, v, err, using))
			}
		}
		e.set(c, e.def)
	}
	fs := flag.NewFlagSet("m0serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	given := map[string][]string{}
	for _, s := range settings {
		s := s
		parse := func(v string) error {
			if err := s.set(&Config{}, v); err != nil {
				return err
			}
			given[s.name] = append(given[s.name], v)
			return nil
		}
		if s.arg == "" {
			fs.BoolFunc(s.name, s.usage, func(v string) error { return parse(v) })
		} else {
			fs.Func(s.name, s.usage, parse)
		}
	}
	help := fs.Bool("help", false, "print this help")
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, errHelp
			}
			return nil, &UsageError{Msg: err.Error() + " (see m0serve --help)"}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *help {
		return nil, errHelp
	}
	if len(positional) > 1 {
		return nil, &UsageError{Msg: fmt.Sprintf("one application expected, got %q (see m0serve --help)", positional)}
	}
	if len(positional) == 1 {
		c.App = positional[0]
	}
	for _, s := range settings {
		if vs, ok := given[s.name]; ok {
			for _, v := range vs {
				s.set(c, v)
			}
			value := vs[len(vs)-1] // a repeated flag: the last one counts
			if s.multi {
				value = strings.Join(vs, ", ")
			}
			c.Sources[s.name], c.Values[s.name] = FromFlag, redact(s.name, value)
			continue
		}
		if s.env != "" {
			if v := getenv(s.env); v != "" {
				if err := s.set(c, v); err == nil {
					c.Sources[s.name], c.Values[s.name] = FromEnv, redact(s.name, v)
					continue
				} else {
					c.Notes = append(c.Notes, fmt.Sprintf("m0serve: ignored %s=%s (%v); using the default, %s", s.env, redact(s.name, v), err, orNone(s.def)))
				}
			}
		}
		if s.def != "" {
			s.set(c, s.def)
		}
		c.Sources[s.name], c.Values[s.name] = FromDefault, s.def
	}
	return c, nil
}

// redact hides the password of --pg-listen's DSN (pgbus.Redact).
func redact(name, v string) string {
	if name != "pg-listen" || v == "" {
		return v
	}
	return pgbus.Redact(v)
}

// isDefault reports whether the setting's value in c means what its
// default means ("0", "no" and "false" are one switch; "01" is 1).
func (s setting) isDefault(c *Config) bool {
	if s.multi {
		return c.Sources[s.name] == FromDefault
	}
	want, got := &Config{}, &Config{}
	if s.def != "" {
		s.set(want, s.def)
	}
	if err := s.set(got, c.Values[s.name]); err != nil {
		return false
	}
	return reflect.DeepEqual(want, got)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

var errHelp = &UsageError{Msg: "help requested"}

// IsHelp reports whether Parse stopped for --help.
func IsHelp(err error) bool { return err == errHelp }

// PrintHelp writes the usage text, naming each flag's variable.
func PrintHelp(w io.Writer) {
	fmt.Fprint(w, `usage: m0serve [flags] MODULE[:ATTR]
       m0serve --doctor [flags] [MODULE[:ATTR]]

Serves a Python web application. MODULE[:ATTR] names the callable (ATTR
defaults to application); a bare MODULE tries MODULE.asgi:application,
MODULE.wsgi:application, MODULE:app and MODULE.main:app, in that order.
A flag beats its M0_* variable, which beats the default.

`)
	for _, s := range settings {
		head := "  --" + s.name
		if s.arg != "" {
			head += " " + s.arg
		}
		if s.env != "" {
			head += "   [" + s.env + "]"
		}
		def := ""
		if s.def != "" && s.def != "false" {
			def = " (default " + s.def + ")"
		}
		fmt.Fprintf(w, "%s\n        %s%s\n", head, s.usage, def)
	}
	fmt.Fprint(w, `
The libpython loaded is that of the python3 on PATH, or M0_PYTHON_LIBRARY.
Exit codes: 2 usage, 1 startup failure, 78 a configuration that cannot run.
`)
}
