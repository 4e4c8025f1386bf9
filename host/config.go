package host

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/m0serve/m0/internal/bind"
	"github.com/m0serve/m0/internal/front"
	"github.com/m0serve/m0/realtime"
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
	App    string // MODULE[:ATTR]; empty for none
	AppDir string // prepended to sys.path
	Doctor bool   // print the resolved configuration and the checks; bind nothing
	Host   string
	Port   int
	// Binds are --bind's places (and M0_BIND's), UDS --uds's path: see
	// Places for which settings name where the server listens.
	Binds    []bind.Spec
	UDS      string
	UnixMode os.FileMode // a unix socket's mode; 0: bind.DefaultMode
	Backlog  int         // the listen queue; 0: the kernel's somaxconn
	PIDFile  string      // --pid: the main process's pid is written there
	// worker: this process serves what a supervisor opened, and checks
	// none of the places.
	worker  bool
	Workers int // processes
	Threads int // accept loops in one process (free-threaded CPython)
	// BlockingThreads is the Python thread pool: -1 means min(cores, 8)
	// (wire.AutoThreads), 0 no pool, as the bridges' Options.Threads.
	BlockingThreads int
	// Interpreters is the subinterpreters each process runs its WSGI
	// applications, and its ASGI ones on the buffered path, in
	// (--interpreters), 0 for none: the main interpreter.
	Interpreters         int
	Protocol             string // "", "wsgi" or "asgi"
	Loop                 string // the ASGI event loop: "auto", "uvloop" or "asyncio"
	AccessLog            bool
	AccessLogFormat      string   // gunicorn's atoms; "" JSON lines
	AccessLogFields      []string // more JSON fields (middleware.AccessFields)
	QoS                  string   // the scheduling class of the Python threads
	SpawnWorkers         bool
	MaxBody              int64         // bytes; 0 none
	BodyTimeout          time.Duration // 0: never
	IdleTimeout          time.Duration // 0: never
	MaxKeepaliveRequests int           // 0: never
	MaxRequests          int           // a worker's requests before it is replaced; 0: never
	MaxRequestsJitter    int           // up to this many more, per worker
	WorkersMaxRSS        int           // MiB of resident memory past which a worker is replaced; 0: never
	WorkersLifetime      time.Duration // how long a worker serves before it is replaced; 0: never
	LimitConcurrency     int           // requests in flight per worker past which the next gets 503; 0: none
	MaxQueueWait         time.Duration // how long a request waits for a Python thread before 503; 0: as long as it lasts
	Timeout              time.Duration // how long a request may run the application before its response begins; 0: no bound
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
	// Inverted runs the ASGI application's network on its event loop's
	// thread (M0_INVERTED=1): asgi.Options.Inline, docs/asgi.md.
	Inverted bool
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
		return k, &refusal{Found: "M0_GRANT_KEY_PREV is set, and M0_GRANT_KEY is not",
			Fix: "set M0_GRANT_KEY to the key grants are signed with now, or unset M0_GRANT_KEY_PREV"}
	case c.GrantKey == "":
		return k, &refusal{Found: "a hold mount verifies grants, and M0_GRANT_KEY is not set",
			Fix: fmt.Sprintf("set M0_GRANT_KEY to a secret of %d bytes or more, the one the application signs with", realtime.MinGrantKey)}
	case len(k.Key) < realtime.MinGrantKey:
		return k, &refusal{Found: fmt.Sprintf("M0_GRANT_KEY is %d bytes", len(k.Key)),
			Fix: fmt.Sprintf("set M0_GRANT_KEY to a secret of %d bytes or more", realtime.MinGrantKey)}
	case k.Prev != nil && len(k.Prev) < realtime.MinGrantKey:
		return k, &refusal{Found: fmt.Sprintf("M0_GRANT_KEY_PREV is %d bytes", len(k.Prev)),
			Fix: fmt.Sprintf("set M0_GRANT_KEY_PREV to the previous key, of %d bytes or more, or unset it", realtime.MinGrantKey)}
	}
	return k, nil
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
