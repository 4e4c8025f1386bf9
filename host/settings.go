package host

import (
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/m0serve/m0/internal/bind"
	"github.com/m0serve/m0/internal/wire"
	"github.com/m0serve/m0/middleware"
	"github.com/m0serve/m0/static"
)

// notBuilt says, per variable of a feature this build does not have, why
// not and what to run instead: the fix of its refusal.
var notBuilt = map[string]string{}

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
	{"M0_INVERTED", "0", "the inverted ASGI loop (the event loop and the server on one thread)", func(c *Config, v string) error {
		return oneOrZero(v, &c.Inverted)
	}},
	{"M0_HANDOFF", "1", "--workers", func(c *Config, v string) error {
		var on bool
		err := oneOrZero(v, &on)
		if err == nil {
			c.NoHandoff = !on
		}
		return err
	}},
}

// oneOrZero reads a variable that is 1 or 0 into *on.
func oneOrZero(v string, on *bool) error {
	switch v {
	case "1", "0":
		*on = v == "1"
		return nil
	}
	return fmt.Errorf("want 1 or 0, not %q", v)
}

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
	{name: "bind", env: "M0_BIND", multi: true, arg: "ADDR", usage: "where to listen: HOST:PORT, unix:PATH or fd://N (repeatable; M0_BIND: comma-separated); in place of --host and --port", set: func(c *Config, v string) error {
		for _, one := range strings.Split(v, ",") {
			s, err := bind.Parse(strings.TrimSpace(one))
			if err != nil {
				return err
			}
			c.Binds = append(c.Binds, s)
		}
		return nil
	}},
	{name: "uds", env: "M0_UDS", arg: "PATH", usage: "listen on the unix socket PATH, as --bind unix:PATH", set: func(c *Config, v string) error {
		if _, err := bind.Parse("unix:" + v); err != nil {
			return err
		}
		c.UDS = v
		return nil
	}},
	{name: "unix-mode", env: "M0_UNIX_MODE", def: "666", arg: "OCTAL", usage: "file mode of the unix sockets m0serve makes", set: func(c *Config, v string) error {
		n, err := strconv.ParseUint(strings.TrimPrefix(v, "0o"), 8, 32)
		if err != nil || n > 0o777 || n == 0 {
			return fmt.Errorf("want an octal mode from 1 to 777 such as 660, not %q", v)
		}
		c.UnixMode = os.FileMode(n)
		return nil
	}},
	{name: "backlog", env: "M0_BACKLOG", def: "somaxconn", arg: "N", usage: "the listen queue of each socket (somaxconn: the kernel's limit)", set: func(c *Config, v string) error {
		if v == "somaxconn" {
			c.Backlog = 0
			return nil
		}
		return setCount(func(c *Config) *int { return &c.Backlog }, 1)(c, v)
	}},
	{name: "pid", env: "M0_PID_FILE", arg: "FILE", usage: "write the main process's pid to FILE (removed at exit)", set: func(c *Config, v string) error {
		c.PIDFile = v
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
	{name: "blocking-threads", env: "M0_BLOCKING_THREADS", def: "auto", arg: "N", usage: "Python threads running the application (0: one thread, no pool; auto: min(cores, 8), one a core on a free-threaded CPython)", set: func(c *Config, v string) error {
		if v == "auto" {
			c.BlockingThreads = -1
			return nil
		}
		return setCount(func(c *Config) *int { return &c.BlockingThreads }, 0)(c, v)
	}},
	{name: "interpreters", env: "M0_INTERPRETERS", def: "0", arg: "N", usage: "subinterpreters with their own GIL running the application in each process (CPython 3.13+; an ASGI application on the executor runs a loop in each; 0: the main interpreter)", set: setCount(func(c *Config) *int { return &c.Interpreters }, 0)},
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
		n, err := parseSize(v)
		c.MaxBody = n
		return err
	}},
	{name: "body-timeout", env: "M0_BODY_TIMEOUT", def: "30", arg: "SECONDS", usage: "a body still arriving this long after its headers gets 408 (0: never)", set: setDuration(func(c *Config) *time.Duration { return &c.BodyTimeout })},
	{name: "idle-timeout", def: "60", arg: "SECONDS", usage: "close idle keep-alive connections, and responses the client stops reading (0: never)", set: setDuration(func(c *Config) *time.Duration { return &c.IdleTimeout })},
	{name: "max-keepalive-requests", env: "M0_MAX_KEEPALIVE_REQUESTS", def: "0", arg: "N", usage: "close a connection after N requests (0: never)", set: setCount(func(c *Config) *int { return &c.MaxKeepaliveRequests }, 0)},
	{name: "max-requests", env: "M0_MAX_REQUESTS", def: "0", arg: "N", usage: "replace a worker once it has served N requests (0: never); runs a supervisor", set: setCount(func(c *Config) *int { return &c.MaxRequests }, 0)},
	{name: "max-requests-jitter", env: "M0_MAX_REQUESTS_JITTER", def: "0", arg: "J", usage: "add up to J to each worker's --max-requests, so that workers are not replaced together", set: setCount(func(c *Config) *int { return &c.MaxRequestsJitter }, 0)},
	{name: "workers-max-rss", env: "M0_WORKERS_MAX_RSS", def: "0", arg: "MIB", usage: "replace a worker whose resident memory passes MIB mebibytes (0: never); runs a supervisor", set: setCount(func(c *Config) *int { return &c.WorkersMaxRSS }, 0)},
	{name: "workers-lifetime", env: "M0_WORKERS_LIFETIME", def: "0", arg: "SECONDS", usage: "replace a worker once it has served this long (0: never); runs a supervisor", set: setDuration(func(c *Config) *time.Duration { return &c.WorkersLifetime })},
	{name: "limit-concurrency", env: "M0_LIMIT_CONCURRENCY", def: "0", arg: "N", usage: "past N requests in flight in a worker, answer the next 503 before Python (0: no bound)", set: setCount(func(c *Config) *int { return &c.LimitConcurrency }, 0)},
	{name: "max-queue-wait", env: "M0_MAX_QUEUE_WAIT", def: "0", arg: "SECONDS", usage: "answer 503 a request that waits this long for a Python thread (0: it waits)", set: setDuration(func(c *Config) *time.Duration { return &c.MaxQueueWait })},
	{name: "timeout", env: "M0_TIMEOUT", def: "0", arg: "SECONDS", usage: "a request still running the application this long is interrupted, its stack logged, and answered 504 (0: never)", set: setDuration(func(c *Config) *time.Duration { return &c.Timeout })},
	{name: "access-log", env: "M0_ACCESS_LOG", def: "false", usage: "one JSON line per response on stdout", set: setBool(func(c *Config) *bool { return &c.AccessLog })},
	{name: "access-log-format", env: "M0_ACCESS_LOG_FORMAT", def: "", arg: "FORMAT", usage: "access lines as text in gunicorn's format (%(h)s %(r)s %(s)s ...; turns the access log on)", set: func(c *Config, v string) error {
		if v == "" {
			c.AccessLogFormat = ""
			return nil
		}
		if v == "gunicorn" {
			v = middleware.DefaultAccessFormat
		}
		if _, err := middleware.AccessLogWith(io.Discard, middleware.AccessLogOptions{Format: v}); err != nil {
			return err
		}
		c.AccessLogFormat = v
		return nil
	}},
	{name: "access-log-fields", env: "M0_ACCESS_LOG_FIELDS", def: "", arg: "LIST", usage: "add user_agent, referer, request_id (comma-separated) to each JSON access line", set: func(c *Config, v string) error {
		c.AccessLogFields = nil
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				c.AccessLogFields = append(c.AccessLogFields, f)
			}
		}
		_, err := middleware.AccessLogWith(io.Discard, middleware.AccessLogOptions{Fields: c.AccessLogFields})
		return err
	}},
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
		d, err := parseDuration(v)
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
