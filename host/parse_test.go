package host

import (
	"github.com/m0serve/m0/internal/wire"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     func(string) string
		port    int
		host    string
		threads int
		source  Source // of port
		code    int
		note    string
	}{
		{name: "defaults", args: []string{"app"}, env: env(), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "flag beats env", args: []string{"--port", "9001", "app"}, env: env("M0_PORT", "9002"), port: 9001, host: "0.0.0.0", threads: -1, source: FromFlag},
		{name: "env beats default", args: []string{"app"}, env: env("M0_PORT", "9002", "M0_BLOCKING_THREADS", "3"), port: 9002, host: "0.0.0.0", threads: 3, source: FromEnv},
		{name: "flags after the app", args: []string{"app", "--port=9003", "--blocking-threads", "0"}, env: env(), port: 9003, host: "0.0.0.0", threads: 0, source: FromFlag},
		{name: "bracketed IPv6", args: []string{"--host", "[::1]", "app"}, env: env(), port: 8000, host: "::1", threads: -1, source: FromDefault},
		{name: "lenient env", args: []string{"app"}, env: env("M0_PORT", "80eighty"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault, note: "ignored M0_PORT=80eighty"},
		{name: "strict flag", args: []string{"--port", "80eighty", "app"}, env: env(), code: ExitUsage},
		{name: "unknown flag", args: []string{"--nope", "app"}, env: env(), code: ExitUsage},
		{name: "two apps", args: []string{"a", "b"}, env: env(), code: ExitUsage},
		{name: "port 0 flag", args: []string{"--port", "0", "app"}, env: env(), code: ExitConfig},
		{name: "port 0 env", args: []string{"app"}, env: env("M0_PORT", "0"), code: ExitConfig},
		{name: "port too high", args: []string{"--port", "65536", "app"}, env: env(), code: ExitConfig},
		{name: "negative threads", args: []string{"--blocking-threads", "-1", "app"}, env: env(), code: ExitUsage},
		{name: "bad size flag", args: []string{"--max-body", "4mb", "app"}, env: env(), code: ExitUsage},
		{name: "bad size env", args: []string{"app"}, env: env("M0_MAX_BODY", "lots"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault, note: "ignored M0_MAX_BODY=lots"},
		{name: "bad duration flag", args: []string{"--body-timeout", "soon", "app"}, env: env(), code: ExitUsage},
		{name: "unknown qos flag", args: []string{"--qos", "turbo", "app"}, env: env(), code: ExitUsage},
		{name: "unknown qos env", args: []string{"app"}, env: env("M0_QOS", "turbo"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault, note: "ignored M0_QOS=turbo"},
		{name: "bad bool env", args: []string{"app"}, env: env("M0_ACCESS_LOG", "maybe"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault, note: "ignored M0_ACCESS_LOG=maybe"},
		{name: "bad mount", args: []string{"--mount", "api=x", "app"}, env: env(), code: ExitUsage},
		{name: "bad static header", args: []string{"--static-header", "X-A", "app"}, env: env(), code: ExitUsage},
		{name: "replay frames over the cap", args: []string{"--replay-frames", "5000", "app"}, env: env(), code: ExitConfig},
		{name: "workers", args: []string{"--workers", "2", "app"}, env: env(), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "pg-listen", args: []string{"--pg-listen", "postgres://x:secret@db/x", "app"}, env: env(), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "handoff off", args: []string{"app"}, env: env("M0_HANDOFF", "0"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "handoff lenient", args: []string{"app"}, env: env("M0_HANDOFF", "no"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault, note: "ignored M0_HANDOFF=no"},
		{name: "workers 1 is the default", args: []string{"--workers", "1", "app"}, env: env(), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "workers from env", args: []string{"app"}, env: env("M0_WORKERS", "3"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "threads beside workers", args: []string{"--threads", "2", "--workers", "2", "app"}, env: env(), code: ExitConfig},
		{name: "realtime", args: []string{"--realtime", "--replay-frames", "4096", "app"}, env: env(), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "replay frames over the cap from env", args: []string{"app"}, env: env("M0_REPLAY_FRAMES", "4097"), code: ExitConfig},
		{name: "heartbeat and keepalive", args: []string{"app"}, env: env("M0_SSE_HEARTBEAT_MS", "250", "M0_STREAM_KEEPALIVE_S", "0"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "lenient heartbeat", args: []string{"app"}, env: env("M0_SSE_HEARTBEAT_MS", "15s"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault, note: "ignored M0_SSE_HEARTBEAT_MS=15s"},
		{name: "lenient keepalive", args: []string{"app"}, env: env("M0_STREAM_KEEPALIVE_S", "-1"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault, note: "ignored M0_STREAM_KEEPALIVE_S=-1"},
		{name: "protocol asgi", args: []string{"--protocol", "asgi", "app"}, env: env(), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "unknown loop", args: []string{"--loop", "trio", "app"}, env: env(), code: ExitUsage},
		{name: "unknown loop from env", args: []string{"app"}, env: env("M0_LOOP", "trio"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault, note: "ignored M0_LOOP=trio"},
		{name: "a switch off by another spelling", args: []string{"--realtime=off", "--reload=0", "app"}, env: env("M0_SPAWN_WORKERS", "no"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "a count by another spelling", args: []string{"--workers", "01", "app"}, env: env(), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "repeated flag keeps the last", args: []string{"--port", "9001", "--port", "9002", "--workers", "1", "--workers", "1", "app"}, env: env(), port: 9002, host: "0.0.0.0", threads: -1, source: FromFlag},
		{name: "zero workers by flag", args: []string{"--workers", "0", "app"}, env: env(), code: ExitConfig},
		{name: "zero workers by env", args: []string{"app"}, env: env("M0_WORKERS", "0"), code: ExitConfig},
		{name: "inverted loop", args: []string{"app"}, env: env("M0_INVERTED", "1"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "inverted loop beside --realtime", args: []string{"--realtime", "app"}, env: env("M0_INVERTED", "1"), code: ExitConfig},
		{name: "inverted loop beside --metrics", args: []string{"--metrics", "app"}, env: env("M0_INVERTED", "1"), code: ExitConfig},
		{name: "flagless variable at its default", args: []string{"app"}, env: env("M0_SSE_HEARTBEAT_MS", "15000"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "grant key set", args: []string{"app"}, env: env("M0_GRANT_KEY", strings.Repeat("k", 32)), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault},
		{name: "grant key too short", args: []string{"app"}, env: env("M0_GRANT_KEY", "k"), code: ExitConfig},
		{name: "previous grant key too short", args: []string{"app"}, env: env("M0_GRANT_KEY", strings.Repeat("k", 32), "M0_GRANT_KEY_PREV", "p"), code: ExitConfig},
		{name: "grant cookie not a cookie name", args: []string{"app"}, env: env("M0_GRANT_COOKIE", "a b"), port: 8000, host: "0.0.0.0", threads: -1, source: FromDefault, note: "ignored M0_GRANT_COOKIE=a b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse(c.args, c.env)
			if err == nil {
				for _, ch := range configChecks(cfg) {
					if !ch.OK {
						err = &refusal{Found: ch.Detail, Fix: ch.Fix}
						break
					}
				}
			}
			if code := codeOf(err); code != c.code {
				t.Fatalf("exit %d (%v), want %d", code, err, c.code)
			}
			if c.code != 0 {
				if c.code == ExitConfig && !strings.Contains(err.Error(), "(") {
					t.Errorf("refusal without a fix: %v", err)
				}
				return
			}
			if cfg.Port != c.port || cfg.Host != c.host || cfg.BlockingThreads != c.threads || cfg.App == "" {
				t.Errorf("cfg = %+v", cfg)
			}
			if cfg.Sources["port"] != c.source {
				t.Errorf("port source %s, want %s", cfg.Sources["port"], c.source)
			}
			if got := strings.Join(cfg.Notes, "\n"); (c.note == "") != (got == "") || !strings.Contains(got, c.note) {
				t.Errorf("notes %q, want %q", got, c.note)
			}
		})
	}
}

func FuzzParsePort(f *testing.F) {
	for _, s := range []string{"8000", "0", "65536", "80eighty", "-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := Parse([]string{"app"}, env("M0_PORT", s))
		// A variable never makes a usage error: it is used or ignored.
		if err != nil {
			t.Fatalf("M0_PORT=%q gave an error: %v", s, err)
		}
		portOK := configChecks(cfg)[0].OK
		if portOK != (cfg.Port >= 1 && cfg.Port <= 65535) {
			t.Fatalf("M0_PORT=%q: port %d, check ok %v", s, cfg.Port, portOK)
		}
	})
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "512k": 512 << 10, "4m": 4 << 20, "64M": 64 << 20, "1g": 1 << 30} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "-1", "4mb", "1.5m", "+4", "4 m", "99999999999g"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "30": 30 * time.Second, "0.5": 500 * time.Millisecond, "500ms": 500 * time.Millisecond, "2m": 2 * time.Minute} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "soon", "NaN", "-5s", "+3", "1e99"} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted", in)
		}
	}
}

// FuzzParseSize: a size taken is what its digits and unit say, from 0 to
// 1<<62, and re-formats (formatSize, as --help and the doctor print it) to
// a spelling that parses to the same value.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4m", "512k", "1g", "0", "-1", "9223372036854775807", "8796093022208k", " 64M ", "4294967296g", "4294967297g", "1K", "+1", "0x10", "1_0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			if n != 0 {
				t.Fatalf("ParseSize(%q) refused with %d", s, n)
			}
			return
		}
		if n < 0 || n > 1<<62 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
		// The same value, worked out another way.
		digits := strings.TrimSpace(s)
		unit := new(big.Int).SetInt64(1)
		switch last := strings.ToLower(digits[len(digits)-1:]); last {
		case "k", "m", "g":
			unit.Lsh(unit, uint(map[string]int{"k": 10, "m": 20, "g": 30}[last]))
			digits = digits[:len(digits)-1]
		}
		want, ok := new(big.Int).SetString(digits, 10)
		if !ok || digits[0] == '+' || want.Mul(want, unit).Cmp(big.NewInt(n)) != 0 {
			t.Fatalf("ParseSize(%q) = %d, want %v", s, n, want)
		}
		if again, err := parseSize(wire.FormatSize(n)); err != nil || again != n {
			t.Fatalf("ParseSize(%q) = %d, written %q, which parses to %d, %v", s, n, wire.FormatSize(n), again, err)
		}
	})
}

// FuzzParseDuration: a duration taken is from 0 to 1e9 seconds, and
// re-formats (Duration.String) to a spelling that parses to the same value.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30", "0.5", "500ms", "-1", "1e9", "NaN", "Inf", "1h2m3.5s", " 2m ", "+3", "0x10", "1e-12", "2562047h47m16.854775807s", ".5", "5."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if err != nil {
			if d != 0 {
				t.Fatalf("ParseDuration(%q) refused with %v", s, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v", s, d)
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && (f > 1e9 || d > 1e9*time.Second) {
			t.Fatalf("ParseDuration(%q) = %v: more than 1e9 seconds", s, d)
		}
		if again, err := parseDuration(d.String()); err != nil || again != d {
			t.Fatalf("ParseDuration(%q) = %v, which parses back as %v, %v", s, d, again, err)
		}
	})
}

func TestPGListenPasswordIsRedacted(t *testing.T) {
	for _, dsn := range []string{"postgres://app:hunter2@db/x", "host=db user=app password=hunter2 dbname=x", "host=db password='hunter2' dbname=x"} {
		cfg, err := Parse([]string{"app"}, env("M0_PG_LISTEN", dsn))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(cfg.Values["pg-listen"], "hunter2") {
			t.Errorf("%q kept as %q", dsn, cfg.Values["pg-listen"])
		}
		for _, ch := range configChecks(cfg) {
			if strings.Contains(ch.Detail, "hunter2") {
				t.Errorf("check %s prints the password: %s", ch.Name, ch.Detail)
			}
		}
	}
}

func TestStreamSettings(t *testing.T) {
	for _, c := range []struct {
		env                  func(string) string
		heartbeat, keepalive time.Duration
	}{
		{env(), 15 * time.Second, 15 * time.Second},
		{env("M0_SSE_HEARTBEAT_MS", "250", "M0_STREAM_KEEPALIVE_S", "0"), 250 * time.Millisecond, 0},
		{env("M0_SSE_HEARTBEAT_MS", "0", "M0_STREAM_KEEPALIVE_S", "60"), 0, time.Minute},
		{env("M0_SSE_HEARTBEAT_MS", "soon", "M0_STREAM_KEEPALIVE_S", "1.5"), 15 * time.Second, 15 * time.Second},
	} {
		cfg, err := Parse([]string{"app"}, c.env)
		if err != nil || cfg.SSEHeartbeat != c.heartbeat || cfg.StreamKeepAlive != c.keepalive {
			t.Errorf("heartbeat %v keepalive %v (%v), want %v %v", cfg.SSEHeartbeat, cfg.StreamKeepAlive, err, c.heartbeat, c.keepalive)
		}
	}
}
