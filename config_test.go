package m0

import (
	"strings"
	"testing"
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse(c.args, c.env)
			if code := ExitCode(err); code != c.code {
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
		if ExitCode(err) == ExitUsage {
			t.Fatalf("M0_PORT=%q gave a usage error: %v", s, err)
		}
		if err == nil && (cfg.Port < 1 || cfg.Port > 65535) {
			t.Fatalf("M0_PORT=%q accepted port %d", s, cfg.Port)
		}
	})
}
