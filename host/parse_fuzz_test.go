package host

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse: the command line and the environment, whatever they hold.
// Variables never make an error (a bad one is noted and defaulted); flags
// make a *UsageError or nothing; every setting says where it came from,
// a flag beating its variable beating the default; and the configuration
// resolved, written back as flags (and the flagless variables as they
// were), resolves to itself.
func FuzzParse(f *testing.F) {
	var all []string
	for _, s := range settings {
		if s.env != "" {
			all = append(all, s.env+"="+s.def)
		}
	}
	for _, e := range flaglessEnv {
		all = append(all, e.name+"="+e.def)
	}
	f.Add("app", strings.Join(all, "\n"))
	f.Add("--port\n9001\napp", "M0_PORT=9002")
	f.Add("app\n--port=9003\n--blocking-threads\n0", "M0_BLOCKING_THREADS=auto")
	f.Add("--host\n[::1]\n--max-body\n64M\n--body-timeout\n0.5\napp", "M0_MAX_BODY=lots\nM0_QOS=turbo")
	f.Add("--mount\n/api/=api:app\n--static\n/s=static\n--static-header\nX-A: b\n--mount\n/=x", "M0_SSE_HEARTBEAT_MS=15s")
	f.Add("--realtime=off\n--reload=0\n--workers\n01\n--idle-timeout\n2m", "M0_SPAWN_WORKERS=no\nM0_HANDOFF=0")
	f.Add("--pg-listen\npostgres://u:pw@db/x\n--access-log\n--doctor", "M0_PG_LISTEN=host=db password=pw\nM0_GRANT_COOKIE=a b")
	f.Add("--help", "")
	f.Add("a\nb", "M0_APP_TICK_MS=0")
	f.Add("--\n-app", "M0_GRANT_KEY=k")
	f.Fuzz(func(t *testing.T, argLines, envLines string) {
		var args []string
		if argLines != "" {
			args = strings.Split(argLines, "\n")
		}
		vars := map[string]string{}
		for _, kv := range strings.Split(envLines, "\n") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				vars[k] = v
			}
		}
		getenv := func(k string) string { return vars[k] }
		if _, err := Parse(nil, getenv); err != nil {
			t.Fatalf("variables %q made an error: %v", vars, err)
		}
		c, err := Parse(args, getenv)
		if err != nil {
			var u *UsageError
			if !errors.As(err, &u) || c != nil {
				t.Fatalf("Parse(%q): %v, %v", args, c, err)
			}
			return
		}
		for _, s := range settings {
			src := c.Sources[s.name]
			switch {
			case src == FromEnv && (s.env == "" || vars[s.env] == ""):
				t.Fatalf("--%s from a variable that is not set", s.name)
			case src == FromDefault && c.Values[s.name] != s.def:
				t.Fatalf("--%s: default %q, value %q", s.name, s.def, c.Values[s.name])
			case src == "":
				t.Fatalf("--%s has no source", s.name)
			}
		}
		// Written back as flags, the configuration is itself.
		multi := map[string][]string{"mount": c.Mounts, "static": c.Static, "static-header": c.StaticHeaders, "reload-dir": c.ReloadDirs}
		var again []string
		for _, s := range settings {
			if vs, ok := multi[s.name]; ok {
				for _, v := range vs {
					again = append(again, "--"+s.name+"="+v)
				}
				continue
			}
			v := c.Values[s.name]
			if s.name == "pg-listen" {
				v = c.PGListen // Values holds it with the password hidden
			}
			if c.Sources[s.name] != FromDefault || v != "" {
				again = append(again, "--"+s.name+"="+v)
			}
		}
		if c.App != "" {
			again = append(again, "--", c.App)
		}
		flagless := func(k string) string { return c.Env[k] }
		c2, err := Parse(again, flagless)
		if err != nil {
			t.Fatalf("Parse(%q) = %+v, written back as %q: %v", args, c, again, err)
		}
		for _, x := range []*Config{c, c2} {
			x.Sources, x.Values, x.Notes = nil, nil, nil
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("Parse(%q) = %+v, written back as %q, parses to %+v", args, c, again, c2)
		}
	})
}
