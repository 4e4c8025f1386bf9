package host

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPlaces: which settings say where to listen, and the refusals of
// both kinds given the same way.
func TestPlaces(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		env    func(string) string
		places string // the specs, joined by a space
		check  string // the failed check, when one fails
	}{
		{name: "default", args: []string{"app"}, env: env(), places: "0.0.0.0:8000"},
		{name: "host and port", args: []string{"--host", "::1", "--port", "9001", "app"}, env: env(), places: "[::1]:9001"},
		{name: "binds", args: []string{"--bind", "127.0.0.1:9001", "--bind", "unix:/tmp/a.sock", "app"}, env: env(), places: "127.0.0.1:9001 unix:/tmp/a.sock"},
		{name: "bind and uds", args: []string{"--bind", "127.0.0.1:9001", "--uds", "/tmp/b.sock", "app"}, env: env(), places: "127.0.0.1:9001 unix:/tmp/b.sock"},
		{name: "M0_BIND, comma-separated", args: []string{"app"}, env: env("M0_BIND", "127.0.0.1:9001, unix:/tmp/a.sock"), places: "127.0.0.1:9001 unix:/tmp/a.sock"},
		{name: "a --bind flag beats M0_PORT", args: []string{"--bind", "unix:/tmp/a.sock", "app"}, env: env("M0_PORT", "9002"), places: "unix:/tmp/a.sock"},
		{name: "a --port flag beats M0_BIND", args: []string{"--port", "9003", "app"}, env: env("M0_BIND", "unix:/tmp/a.sock"), places: "0.0.0.0:9003"},
		{name: "--bind beside --host", args: []string{"--bind", "unix:/tmp/a.sock", "--host", "127.0.0.1", "app"}, env: env(), check: "bind"},
		{name: "--uds beside --port", args: []string{"--uds", "/tmp/a.sock", "--port", "9001", "app"}, env: env(), check: "bind"},
		{name: "M0_BIND beside M0_PORT", args: []string{"app"}, env: env("M0_BIND", "unix:/tmp/a.sock", "M0_PORT", "9001"), check: "bind"},
		{name: "a bind's port 0 is any port", args: []string{"--bind", "127.0.0.1:0", "app"}, env: env(), places: "127.0.0.1:0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse(c.args, c.env)
			if err != nil {
				t.Fatal(err)
			}
			failed := ""
			for _, ch := range listenChecks(cfg) {
				if !ch.OK {
					failed = ch.Name
					if ch.Exit != ExitConfig || ch.Fix == "" {
						t.Errorf("check %s: exit %d, fix %q", ch.Name, ch.Exit, ch.Fix)
					}
					if ch.Name == "bind" && !strings.Contains(ch.Detail, "both say where to listen") {
						t.Errorf("detail %q", ch.Detail)
					}
					break
				}
			}
			if failed != c.check {
				t.Fatalf("failed check %q, want %q", failed, c.check)
			}
			if c.check != "" {
				return
			}
			var got []string
			for _, s := range cfg.Places() {
				got = append(got, s.String())
			}
			if strings.Join(got, " ") != c.places {
				t.Errorf("places %q, want %q", got, c.places)
			}
		})
	}
	for _, bad := range [][]string{{"--bind", "example.com:80"}, {"--bind", "unix:"}, {"--unix-mode", "999"}, {"--unix-mode", "0"}, {"--backlog", "0"}, {"--backlog", "lots"}} {
		if _, err := Parse(append(bad, "app"), env()); codeOf(err) != ExitUsage {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
	cfg, _ := Parse([]string{"--unix-mode", "0o600", "--backlog", "128", "app"}, env("M0_PID_FILE", "/run/x.pid"))
	if cfg.UnixMode != 0o600 || cfg.Backlog != 128 || cfg.PIDFile != "/run/x.pid" {
		t.Errorf("unix mode %o, backlog %d, pid %q", cfg.UnixMode, cfg.Backlog, cfg.PIDFile)
	}
	if cfg, _ := Parse([]string{"app"}, env()); cfg.UnixMode != 0o666 || cfg.Backlog != 0 {
		t.Errorf("defaults: unix mode %o, backlog %d", cfg.UnixMode, cfg.Backlog)
	}
}

// TestPlaceChecks: a unix path a live server holds, a file that is not a
// socket, a directory that is not there, a descriptor that is not a
// listening socket, a pid file of a live process; and that a worker checks
// none of them.
func TestPlaceChecks(t *testing.T) {
	dir := t.TempDir()
	held := filepath.Join(dir, "held.sock")
	ln, err := net.Listen("unix", held)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o644)
	live := filepath.Join(dir, "live.pid")
	os.WriteFile(live, []byte(strconv.Itoa(os.Getppid())+"\n"), 0o644)
	gone := filepath.Join(dir, "gone.pid")
	os.WriteFile(gone, []byte("2147483646\n"), 0o644)
	for _, c := range []struct {
		args   []string
		check  string
		detail string
	}{
		{[]string{"--uds", held}, "unix-socket", "held by a live server"},
		{[]string{"--bind", "unix:" + plain}, "unix-socket", "is not a socket"},
		{[]string{"--bind", "unix:" + filepath.Join(dir, "no", "x.sock")}, "unix-socket", "does not exist"},
		{[]string{"--bind", "fd://987"}, "fd", "not an open descriptor"},
		{[]string{"--pid", live}, "pid", "which is running"},
		{[]string{"--pid", gone}, "", ""},
		{[]string{"--uds", filepath.Join(dir, "new.sock")}, "", ""},
	} {
		cfg, err := Parse(append(c.args, "app"), env())
		if err != nil {
			t.Fatal(err)
		}
		failed, detail := "", ""
		for _, ch := range listenChecks(cfg) {
			if !ch.OK {
				failed, detail = ch.Name, ch.Detail
				break
			}
		}
		if failed != c.check || !strings.Contains(detail, c.detail) {
			t.Errorf("%q: check %q (%s), want %q (%s)", c.args, failed, detail, c.check, c.detail)
		}
		cfg.worker = true
		for _, ch := range listenChecks(cfg) {
			if !ch.OK {
				t.Errorf("%q in a worker: check %s failed", c.args, ch.Name)
			}
		}
	}
	if _, err := os.Stat(held); err != nil {
		t.Errorf("the check touched a held socket: %v", err)
	}
}

func TestPIDFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m0.pid")
	remove, err := writePID(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("pid file %q", b)
	}
	if pid, live := pidFileOwner(path); pid != os.Getpid() || live {
		t.Errorf("this process's own file: %d, %v", pid, live)
	}
	remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("removed: %v", err)
	}
	// A file another process wrote since is left alone.
	remove, _ = writePID(path)
	os.WriteFile(path, []byte("1\n"), 0o644)
	remove()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("another's pid file went: %v", err)
	}
	if _, err := writePID(filepath.Join(t.TempDir(), "no", "x.pid")); codeOf(err) != ExitStartup {
		t.Errorf("a pid file in no directory: %v", err)
	}
}
