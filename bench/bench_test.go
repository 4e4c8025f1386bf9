package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Recorded wrk 4.2 output: every figure the page shows is read from it.
func TestParseWrkRecorded(t *testing.T) {
	cases := []struct {
		file string
		want Run
	}{
		{"wrk-plain.txt", Run{Requests: 231000, RPS: 15395.83, P50ms: 4.01, P90ms: 4.40, P99ms: 7.76, Maxms: 21.13, TransferMiB: 1.98}},
		{"wrk-socket-errors.txt", Run{Requests: 4028, RPS: 268.39, P50ms: 232.51, P90ms: 255.66, P99ms: 302.87, Maxms: 444.51, TransferMiB: 1.60,
			Errors: Errors{Read: 4028}}},
		// 577 of 6,337 answers were 500: the rate is of the other 5,760.
		{"wrk-timeouts-non2xx.txt", Run{Requests: 5760, RPS: 2105.45 * 5760 / 6337, P50ms: 0.18, P90ms: 0.738, P99ms: 4.91, Maxms: 7.86, TransferMiB: 277.21 / 1024,
			Errors: Errors{Timeout: 65, Status: 577}}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			var r Run
			if err := parseWrk(readTestdata(t, c.file), &r); err != nil {
				t.Fatal(err)
			}
			w := c.want
			if r.Requests != w.Requests || !near(r.RPS, w.RPS) || !near(r.P50ms, w.P50ms) || !near(r.P90ms, w.P90ms) ||
				!near(r.P99ms, w.P99ms) || !near(r.Maxms, w.Maxms) || !near(r.TransferMiB, w.TransferMiB) || r.Errors != w.Errors {
				t.Fatalf("parsed\n%+v\nwant\n%+v", r, w)
			}
		})
	}
}

func TestParseWrkRefusesIncomplete(t *testing.T) {
	plain := readTestdata(t, "wrk-plain.txt")
	for name, out := range map[string]string{
		"empty":              "",
		"no --latency":       regexp.MustCompile(`(?s)  Latency Distribution.*?99%[^\n]*\n`).ReplaceAllString(plain, ""),
		"no rate":            strings.Replace(plain, "Requests/sec:  15395.83\n", "", 1),
		"bad rate":           strings.Replace(plain, "15395.83", "15,395", 1),
		"bad socket line":    strings.Replace(readTestdata(t, "wrk-socket-errors.txt"), "read 4028", "read", 1),
		"connection refused": "unable to connect to 127.0.0.1:1 Connection refused\n",
	} {
		var r Run
		if err := parseWrk(out, &r); err == nil {
			t.Errorf("%s: parsed without an error: %+v", name, r)
		}
	}
}

func TestWrkUnits(t *testing.T) {
	for in, want := range map[string]float64{"812.00us": 0.812, "1.23ms": 1.23, "2.00s": 2000, "1.50m": 90000, "0.00us": 0} {
		got, err := parseWrkDuration(in)
		if err != nil || !near(got, want) {
			t.Errorf("parseWrkDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "12", "1.2x", "ms"} {
		if _, err := parseWrkDuration(bad); err == nil {
			t.Errorf("parseWrkDuration(%q) accepted", bad)
		}
	}
	for in, want := range map[string]float64{"512.00B": 512, "1.50KB": 1536, "2.00MB": 2 << 20, "1.00GB": 1 << 30} {
		got, err := parseBytes(in)
		if err != nil || !near(got, want) {
			t.Errorf("parseBytes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if got := wrkArgs(2, 1, 0.4, 5, "http://x/"); strings.Join(got, " ") != "wrk -t1 -c1 -d1s --timeout 5s --latency http://x/" {
		t.Errorf("wrkArgs: %v", got)
	}
}

func TestParseHoldsRecorded(t *testing.T) {
	rs, err := parseHolds(readTestdata(t, "holds-report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Server != "m0serve" || rs[1].Server != "centrifugo" {
		t.Fatalf("parsed %+v", rs)
	}
	r := fanoutRun(rs[1], 20*time.Second)
	if r.Concurrency != 10000 || r.Requests != 1174800 || !near(r.RPS, 58740) || !near(r.P99ms, 1052.853) ||
		r.Errors.Write != 8337 || r.Lost != 0 || !near(r.CPUSeconds, 0.9972799214736617*20) || r.RSSBeforeKB != 613896 || r.RSSPeakKB != 679756 {
		t.Fatalf("fanoutRun: %+v", r)
	}
	if m := fanoutMemory(rs[1]); m.Conns != 10000 || m.Open != 10000 || !near(*m.PerConnKiB, 54.8652) || m.RSSIdleKiB != 65244 {
		t.Fatalf("fanoutMemory: %+v", m)
	}
	if _, err := parseHolds("no json here\n"); err == nil {
		t.Fatal("a report without results parsed")
	}
}

// The suites are data the harness trusts: every template expands to a
// command line, every application has an answer a wrong server fails.
func TestSuitesData(t *testing.T) {
	known := regexp.MustCompile(`^\{(m0serve|bin|venv|mojo|ftvenv|gilvenv|port|dir|module|callable|static|apps|examples|conf|confdir|nginx)\}$`)
	placeholder := regexp.MustCompile(`\{[a-z]+\}`)
	seen := map[string]bool{}
	for _, s := range suites() {
		if seen[s.Name] {
			t.Errorf("suite %s twice", s.Name)
		}
		seen[s.Name] = true
		if s.Tool != "wrk" && s.Tool != "wsload" && s.Tool != "holds" {
			t.Errorf("%s: tool %q", s.Name, s.Tool)
		}
		if len(s.Concurrency) == 0 || len(s.Apps) == 0 || len(s.Servers) == 0 {
			t.Errorf("%s: empty", s.Name)
		}
		peers, m0 := 0, 0
		keys := map[string]bool{}
		for _, sv := range s.Servers {
			if keys[sv.Key] {
				t.Errorf("%s: server %s twice", s.Name, sv.Key)
			}
			keys[sv.Key] = true
			switch {
			case sv.Peer && sv.Base:
				t.Errorf("%s: %s is a peer and a baseline", s.Name, sv.Key)
			case sv.Peer || sv.Base:
				peers++
			default:
				m0++
			}
			for _, a := range s.Apps {
				if !sv.serves(a.Name) || s.Tool == "holds" {
					continue
				}
				args := sv.args(a.Name)
				if len(args) == 0 {
					t.Errorf("%s: %s has no command line for %s", s.Name, sv.Key, a.Name)
				}
				for _, arg := range append(args, sv.Env...) {
					for _, p := range placeholder.FindAllString(arg, -1) {
						if !known.MatchString(p) {
							t.Errorf("%s: %s: unknown placeholder %s", s.Name, sv.Key, p)
						}
					}
				}
				if !strings.Contains(strings.Join(args, " "), "{port}") && sv.Config == nil {
					t.Errorf("%s: %s listens on no {port}", s.Name, sv.Key)
				}
			}
		}
		if peers == 0 || m0 == 0 {
			t.Errorf("%s: %d peers or baselines and %d m0 rows: nothing to compare", s.Name, peers, m0)
		}
		apps := map[string]bool{}
		for _, a := range s.Apps {
			apps[a.Name] = true
		}
		for _, tg := range s.Targets {
			if !apps[tg.App] {
				t.Errorf("%s: a target on %q, not an application of the suite", s.Name, tg.App)
			}
			for _, k := range []string{tg.Server, tg.Versus, tg.Base, tg.VersusBase} {
				if k != "" && k != "best" && !keys[k] {
					t.Errorf("%s: a target names %q, not a server of the suite", s.Name, k)
				}
			}
			if tg.Versus == "" && tg.Max == 0 {
				t.Errorf("%s: a target on %s with nothing to compare with", s.Name, tg.App)
			}
		}
		for _, a := range s.Apps {
			if s.Tool == "wrk" && a.Body == "" && a.ContentType == "" && a.File == "" {
				t.Errorf("%s: %s: no answer to check", s.Name, a.Name)
			}
		}
	}
}

func TestWorkersFlag(t *testing.T) {
	got := strings.Join(workers([]string{"g", "--workers", "1", "app"}, "--workers", "2"), " ")
	if got != "g --workers 2 app" {
		t.Errorf("replace: %s", got)
	}
	base := []string{"m", "--port", "{port}", "app"}
	got = strings.Join(workers(base, "--workers", "2"), " ")
	if got != "m --port {port} --workers 2 app" || strings.Join(base, " ") != "m --port {port} app" {
		t.Errorf("insert: %s (base now %v)", got, base)
	}
}

func TestCheckAnswer(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.bin"), []byte("0123456789"), 0o644)
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "Content-Length": {"10"}}
	if err := checkAnswer(App{Body: "Hello", ContentType: "text/plain"}, dir, h, []byte("Hello")); err != nil {
		t.Error(err)
	}
	for name, c := range map[string]struct {
		app  App
		body string
	}{
		"body":         {App{Body: "Hello"}, "Hello\n"},
		"content type": {App{ContentType: "application/json"}, "{}"},
		"file bytes":   {App{File: "f.bin"}, "0123456780"},
		"file length":  {App{File: "f.bin"}, "012345678"},
	} {
		hh := h.Clone()
		if name == "file length" {
			hh.Set("Content-Length", "9")
		}
		if err := checkAnswer(c.app, dir, hh, []byte(c.body)); err == nil {
			t.Errorf("%s: a wrong answer passed", name)
		}
	}
}

// wsload against a real WebSocket server: one that echoes is measured, one
// that answers something else is counted wrong, one that is not there
// fails to connect.
func TestWsload(t *testing.T) {
	up := websocket.Upgrader{}
	serve := func(reply func([]byte) []byte) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			for {
				kind, m, err := c.ReadMessage()
				if err != nil {
					return
				}
				if c.WriteMessage(kind, reply(m)) != nil {
					return
				}
			}
		}))
	}
	echo := serve(func(m []byte) []byte { return m })
	defer echo.Close()
	r := wsload("ws"+strings.TrimPrefix(echo.URL, "http"), 4, 300*time.Millisecond, 2*time.Second, 32)
	if r.Errors.Total() != 0 || r.Requests == 0 || r.RPS <= 0 || r.P50ms <= 0 || r.P99ms < r.P50ms || r.Maxms < r.P99ms {
		t.Fatalf("echo: %+v", r)
	}
	if err := wsEcho(echo.URL); err != nil {
		t.Fatalf("wsEcho: %v", err)
	}
	wrong := serve(func(m []byte) []byte { return append(m, '!') })
	defer wrong.Close()
	r = wsload("ws"+strings.TrimPrefix(wrong.URL, "http"), 3, 200*time.Millisecond, 2*time.Second, 32)
	if r.Errors.Status != 3 || r.Requests != 0 {
		t.Fatalf("wrong echo: %+v", r)
	}
	if err := wsEcho(wrong.URL); err == nil {
		t.Fatal("wsEcho passed a wrong echo")
	}
	wrong.Close()
	r = wsload("ws"+strings.TrimPrefix(wrong.URL, "http"), 2, 100*time.Millisecond, time.Second, 32)
	if r.Errors.Connect != 2 {
		t.Fatalf("closed server: %+v", r)
	}
}

// holdIdle against real servers: one that keeps connections alive is
// measured over them, one that closes each after its answer holds none,
// and WebSockets are held after an echo.
func TestHoldIdle(t *testing.T) {
	alive := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer alive.Close()
	closing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	}))
	defer closing.Close()
	up := websocket.Upgrader{}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			k, m, err := c.ReadMessage()
			if err != nil || c.WriteMessage(k, m) != nil {
				return
			}
		}
	}))
	defer echo.Close()
	rss := func() func() int64 {
		var n int64 = 1000
		return func() int64 { n += 800; return n } // 800 KiB more held
	}
	m := holdIdle(false, alive.URL+"/", 16, 50*time.Millisecond, rss())
	if m.Open != 16 || m.PerConnKiB == nil || *m.PerConnKiB != 50 || m.Note != "" || m.RSSIdleKiB != 1800 || m.RSSHeldKiB != 2600 {
		t.Fatalf("keep-alive: %+v", m)
	}
	// Long enough for the server's close to reach the client on a loaded
	// machine: it closes right after writing the answer already read.
	m = holdIdle(false, closing.URL+"/", 8, 500*time.Millisecond, rss())
	if m.Open != 0 || m.PerConnKiB != nil || m.Note != heldNone {
		t.Fatalf("closing: %+v", m)
	}
	m = holdIdle(true, echo.URL+"/", 8, 50*time.Millisecond, rss())
	if m.Open != 8 || m.PerConnKiB == nil || *m.PerConnKiB != 100 {
		t.Fatalf("websocket: %+v", m)
	}
	alive.Close()
	m = holdIdle(false, alive.URL+"/", 4, 10*time.Millisecond, rss())
	if m.PerConnKiB != nil || !strings.Contains(m.Note, "4 of 4 connections failed") {
		t.Fatalf("gone: %+v", m)
	}
}

func fixtureReports() []*Report {
	per1k, perG := 1.25, 3.5
	base := Report{
		Date: "2026-12-01T10:00:00Z", Commit: "abc1234", Machine: Machine{CPUs: 2, Model: "Test CPU", Kernel: "6.1", MemGiB: 24},
		Versions: map[string]string{"wrk": "4.2.0", "granian": "2.8.9", "python": "3.11.9"},
		Method:   Method{Tool: "wrk", DurationS: 10, WarmupS: 2, ServerCPU: "0", ClientCPU: "1", Threads: 1, TimeoutS: 5, Description: "wrk ..."},
	}
	wsgi := base
	wsgi.Suite, wsgi.Title, wsgi.About = "wsgi", "WSGI", "A WSGI application."
	wsgi.Servers = []ServerInfo{{Key: "granian", Label: "granian", Peer: true}, {Key: "m0serve", Label: "m0serve"}, {Key: "uwsgi", Label: "uWSGI", Peer: true},
		{Key: "gunicorn-sync", Label: "gunicorn sync", Peer: true}}
	wsgi.Apps = []AppInfo{{Name: "hello", About: "hello world"}}
	wsgi.Targets = []Target{
		{App: "hello", Concurrency: 64, Server: "m0serve", Versus: "granian", Min: 1.1},
		{App: "hello", Concurrency: 1024, Server: "m0serve", Metric: "per_conn_kib", Max: 1, Why: "a reason"},
		{App: "hello", Concurrency: 64, Server: "m0serve", Versus: "uwsgi", Min: 2},
		{App: "hello", Concurrency: 64, Server: "m0serve", Versus: "best", Min: 1.1},
		{App: "hello", Concurrency: 64, Server: "m0serve", Versus: "best", Metric: "cpu_us"},
		{App: "hello", Concurrency: 1024, Server: "m0serve", Versus: "granian", Metric: "per_conn_kib"},
		{App: "hello", Concurrency: 1024, Server: "m0serve", Versus: "granian", Metric: "p99_ms"},
	}
	wsgi.Runs = []Run{
		{App: "hello", Server: "m0serve", Concurrency: 64, RPS: 60000, Requests: 600000, P50ms: 1, P90ms: 1.5, P99ms: 3, Maxms: 9, CPUSeconds: 10, RSSBeforeKB: 20480, RSSPeakKB: 30720, Command: "taskset -c 0 bench/.bin/m0serve hello:application"},
		{App: "hello", Server: "granian", Concurrency: 64, RPS: 50000, Requests: 500000, P50ms: 1.2, P90ms: 1.6, P99ms: 2, Maxms: 5, CPUSeconds: 10},
		{App: "hello", Server: "uwsgi", Concurrency: 64, Failed: "exited during startup (exit status 1)"},
		// Faster than every other and with the lowest p99, but 5% of its
		// requests timed out: no reference.
		{App: "hello", Server: "gunicorn-sync", Concurrency: 64, RPS: 90000, Requests: 90000, P50ms: 0.1, P99ms: 0.5, Maxms: 5000, Errors: Errors{Timeout: 5000}},
		{App: "hello", Server: "m0serve", Concurrency: 1024, RPS: 40000, Requests: 400000, P50ms: 20, P99ms: 300, Maxms: 900, CPUSeconds: 10, Errors: Errors{Timeout: 7}},
		{App: "hello", Server: "granian", Concurrency: 1024, RPS: 45000, Requests: 450000, P50ms: 19, P99ms: 250, Maxms: 800, CPUSeconds: 10},
	}
	wsgi.Memory = []Memory{
		{App: "hello", Server: "m0serve", Conns: 1024, Open: 1024, RSSIdleKiB: 20000, RSSHeldKiB: 21280, PerConnKiB: &per1k},
		{App: "hello", Server: "granian", Conns: 1024, Open: 1024, RSSIdleKiB: 20000, RSSHeldKiB: 23584, PerConnKiB: &perG},
		{App: "hello", Server: "uwsgi", Conns: 1024, Note: "holds no idle connection: it closes each after its answer"},
	}

	workers := base
	workers.Suite, workers.Title, workers.About = "workers", "Workers", "Workers."
	workers.Method.ServerCPU, workers.Method.ClientCPU = "", ""
	workers.Servers = []ServerInfo{{Key: "m0serve-1", Label: "m0serve, 1 worker", Group: "1"}, {Key: "m0serve-2", Label: "m0serve, 2 workers", Group: "2"},
		{Key: "granian-1", Label: "granian, 1 worker", Peer: true, Group: "1"}, {Key: "granian-2", Label: "granian, 2 workers", Peer: true, Group: "2"}}
	workers.Apps = []AppInfo{{Name: "hello", About: "hello"}}
	workers.Runs = []Run{
		{App: "hello", Server: "m0serve-1", Concurrency: 64, RPS: 80, Requests: 800, P99ms: 1},
		{App: "hello", Server: "m0serve-2", Concurrency: 64, RPS: 100, Requests: 1000, P99ms: 1},
		{App: "hello", Server: "granian-1", Concurrency: 64, RPS: 90, Requests: 900, P99ms: 1},
		{App: "hello", Server: "granian-2", Concurrency: 64, RPS: 120, Requests: 1200, P99ms: 1},
	}

	mounts := base
	mounts.Suite, mounts.Title, mounts.About = "mounts", "Mounts", "Mounts."
	mounts.Servers = []ServerInfo{{Key: "unmounted", Label: "m0serve (at /)", Base: true}, {Key: "mounted", Label: "m0serve (mounted)"}}
	mounts.Apps = []AppInfo{{Name: "wsgi", About: "wsgi"}}
	mounts.Runs = []Run{
		{App: "wsgi", Server: "unmounted", Concurrency: 64, RPS: 100, Requests: 1000, P99ms: 2},
		{App: "wsgi", Server: "mounted", Concurrency: 64, RPS: 95, Requests: 950, P99ms: 2},
	}
	return []*Report{&wsgi, &workers, &mounts}
}

// pageHas fails t for each of wants the rendered page lacks.
func pageHas(t *testing.T, page string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q\n%s", want, page)
		}
	}
}

// TestRenderWhy: bench/losses.md's text follows the list of losses the run
// computed, and is left out where m0 loses nowhere.
func TestRenderWhy(t *testing.T) {
	page, _ := render(fixtureReports(), "bench/results", "\nWhy, row by row: the hand-offs.\n")
	list, why, next := strings.Index(page, "## Where m0 loses"), strings.Index(page, "Why, row by row: the hand-offs."), strings.Index(page, "## WSGI")
	if list < 0 || why < list || next < why {
		t.Fatalf("the why must follow the list of losses, before the suites (at %d, %d, %d)", list, why, next)
	}
}

func TestRender(t *testing.T) {
	page, charts := render(fixtureReports(), "bench/results", "")
	method := strings.Index(page, "## Method")
	suite := strings.Index(page, "## WSGI")
	if method < 0 || suite < 0 || method > suite {
		t.Fatalf("the method must come before the suites:\n%s", page)
	}
	pageHas(t, page,
		"measured on 2026-12-01 at commit `abc1234`",
		"[bench/results](../bench/results/)",
		// m0 against the best peer: 60,000 / 50,000 (not gunicorn's 90,000,
		// 5% of its requests timed out), and at 1,024 40,000 / 45,000.
		// Sequential runs: no column for a per-round ratio, the ratio of
		// rates; server CPU per request from each run's CPU seconds over
		// its requests.
		"| suite | application | concurrency | m0 | rate | reference | its rate | ratio | m0 p99 ms |",
		"| WSGI | hello | 64 | m0serve | 60,000 | granian | 50,000 | **1.20x** | 3.00 | 2.00 | 16.7 | 20.0 |",
		"| WSGI | hello | 1024 | m0serve | 40,000 | granian | 45,000 | **0.89x** | 300 | 250 | 25.0 | 22.2 |",
		// Workers: each against the peer with as many workers.
		"| Workers | hello | 64 | m0serve, 1 worker | 80 | granian, 1 worker | 90 | **0.89x** | 1.00 | 1.00 |  |  |",
		"| Workers | hello | 64 | m0serve, 2 workers | 100 | granian, 2 workers | 120 | **0.83x** | 1.00 | 1.00 |  |  |",
		// Mounts: no peer, its baseline.
		"| Mounts | wsgi | 64 | m0serve (mounted) | 95 | m0serve (at /) (baseline) | 100 | **0.95x** | 2.00 | 2.00 |  |  |",
		"| connections | server | req/s | vs baseline |",
		"Mounts, wsgi at 64 connections, m0serve (mounted): 95 req/s, 0.95x its baseline, m0serve (at /) (100).",
		// Losses, stated: the rate at 1,024, the p99 at both, the errors.
		"WSGI, hello at 1024 connections, m0serve: 40,000 req/s, 0.89x its best peer, granian (45,000).",
		"WSGI, hello at 64 connections, m0serve: p99 3.00 ms, granian's 2.00 ms.",
		"WSGI, hello at 1024 connections, m0serve: errors: timeout 7.",
		// A failed peer is shown as failed, with why.
		"| 64 | uWSGI | failed: exited during startup (exit status 1) |",
		// Server CPU per request (10 s over 600,000), RSS.
		"| 64 | **m0serve** | 60,000 | 1.20x | 1.00 | 1.50 | 3.00 | 9.00 |  | 16.7 | 30.0 |",
		// Memory per idle connection.
		"| WSGI | hello | m0serve | 1024 | 1024 | 19.5 | 20.8 | 1.25 |",
		"| WSGI | hello | uWSGI | 1024 | 0 | 0.0 | 0.0 | holds no idle connection: it closed them before the settled reading, after its answer or at its keep-alive timeout |",
		"![WSGI hello throughput](benchmarks/wsgi-hello.svg)",
		"- m0serve: `taskset -c 0 bench/.bin/m0serve hello:application`",
		"Versions: granian 2.8.9, python 3.11.9, wrk 4.2.0.",
		"| WSGI | hello | m0serve at least 1.10x granian at 64 connections | 1.20x (60,000 / 50,000) | met, within the machine's noise |",
		"| WSGI | hello | m0serve KiB per connection at most 1 at 1024 connections | 1.25 | **not met** (a reason) |",
		"| WSGI | hello | m0serve at least 2.00x uWSGI at 64 connections | not measured | n/a |",
		// The best peer is granian: gunicorn's rate has errors, uWSGI failed.
		"| WSGI | hello | m0serve at least 1.10x the best peer (granian) at 64 connections | 1.20x (60,000 / 50,000) | met, within the machine's noise |",
		"| WSGI | hello | m0serve server CPU per request at most the best peer (granian)'s at 64 connections | 16.7 µs / 20.0 µs | met |",
		"| WSGI | hello | m0serve KiB per connection at most granian's at 1024 connections | 1.25 / 3.5 | met |",
		"| WSGI | hello | m0serve p99 at most granian's at 1024 connections | 300 ms / 250 ms | **not met** |",
	)
	for _, name := range []string{"wsgi-hello.svg", "wsgi-hello-latency.svg", "memory.svg"} {
		svg, ok := charts[name]
		if !ok {
			t.Errorf("no chart %s (have %v)", name, len(charts))
			continue
		}
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			_, err := d.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s is not well-formed: %v", name, err)
			}
		}
	}
	if strings.Contains(page, "**In-process**") {
		t.Errorf("the method names an in-process row that no report has")
	}
	if !strings.Contains(charts["wsgi-hello.svg"], ">60,000<") || !strings.Contains(charts["wsgi-hello.svg"], ">failed<") {
		t.Errorf("throughput chart lacks its figures:\n%s", charts["wsgi-hello.svg"])
	}
}

func TestRenderNoLosses(t *testing.T) {
	reps := fixtureReports()[:1]
	reps[0].Runs = reps[0].Runs[:2]
	reps[0].Runs[0].P99ms = 1
	page, _ := render(reps, "r", "")
	if !strings.Contains(page, "Nowhere in this run") {
		t.Fatalf("%s", page)
	}
}

func TestResultsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	day := filepath.Join(dir, "2026-12-01")
	if _, err := writeReport(day, fixtureReports()[0]); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "2026-11-30"), 0o755)
	os.MkdirAll(filepath.Join(dir, "raw"), 0o755)
	latest, err := latestResults(dir)
	if err != nil || latest != day {
		t.Fatalf("latestResults = %s, %v", latest, err)
	}
	docs := filepath.Join(dir, "docs", "benchmarks.md")
	os.MkdirAll(filepath.Dir(docs), 0o755)
	if err := renderPage(day, docs, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "docs", "benchmarks", "wsgi-hello.svg")); err != nil {
		t.Fatal(err)
	}

	// A run --only granian at 64 replaces that run and keeps the others.
	again := fixtureReports()[0]
	again.Runs = []Run{{App: "hello", Server: "granian", Concurrency: 64, RPS: 1, Requests: 10}}
	again.Servers = again.Servers[:1]
	mergeInto(filepath.Join(day, "wsgi.json"), again)
	if len(again.Runs) != 6 || len(again.Servers) != 4 {
		t.Fatalf("merged: %d runs, %d servers", len(again.Runs), len(again.Servers))
	}
	for _, r := range again.Runs {
		if r.Server == "granian" && r.Concurrency == 64 && r.RPS != 1 {
			t.Fatalf("the earlier run was kept: %+v", r)
		}
	}
	b, _ := json.Marshal(again)
	// The per-round ratios of runs not repeated are kept, those of a run
	// repeated are not: it was measured in other rounds.
	first := fixtureReports()[0]
	first.Ratios = []Ratio{{App: "hello", Concurrency: 64, Server: "m0serve", Versus: "granian", Median: 1.2},
		{App: "hello", Concurrency: 1024, Server: "m0serve", Versus: "granian", Median: 0.9}}
	if _, err := writeReport(day, first); err != nil {
		t.Fatal(err)
	}
	again2 := fixtureReports()[0]
	again2.Runs = []Run{{App: "hello", Server: "granian", Concurrency: 64, RPS: 1, Requests: 10}}
	mergeInto(filepath.Join(day, "wsgi.json"), again2)
	if len(again2.Ratios) != 1 || again2.Ratios[0].Concurrency != 1024 {
		t.Fatalf("merged ratios: %+v", again2.Ratios)
	}
	if !strings.Contains(string(b), `"per_conn_kib":1.25`) {
		t.Fatalf("json: %s", b)
	}
}

func TestMedian(t *testing.T) {
	m := median([]Run{{RPS: 3, P99ms: 30}, {RPS: 1, P99ms: 10}, {RPS: 2, P99ms: 20}})
	if m.RPS != 2 || m.P99ms != 20 || len(m.Rates) != 3 || m.Rates[0] != 3 {
		t.Fatalf("median: %+v", m)
	}
	if m := median([]Run{{RPS: 3}, {Failed: "x"}}); m.Failed != "x" {
		t.Fatalf("a failed try must fail the figure: %+v", m)
	}
	if m := median([]Run{{RPS: 5}}); m.RPS != 5 || m.Rates != nil {
		t.Fatalf("one try: %+v", m)
	}
	reps := fixtureReports()
	reps[0].Method.Runs = 3
	reps[0].Runs[0].Rates = []float64{58000, 60000, 61000}
	page, _ := render(reps, "r", "")
	for _, want := range []string{"the load of median rate among 3", "| 64 | **m0serve** | 60,000 (58,000-61,000) | 1.20x |"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestCompactNotes(t *testing.T) {
	got := compactNotes([]string{
		"nginx on 1m at 64: the load tool used 99% of its core: ceiling.",
		"left out: x.",
		"nginx on 1m at 64: the load tool used 102% of its core: ceiling.",
		"nginx on 1m at 64: the load tool used 100% of its core: ceiling.",
		"nginx on 1m at 1024: the load tool used 100% of its core: ceiling.",
	})
	want := []string{
		"nginx on 1m at 64: the load tool used 99-102% of its core: ceiling. (3 runs)",
		"left out: x.",
		"nginx on 1m at 1024: the load tool used 100% of its core: ceiling.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999.4: "999", 1000: "1,000", 1234567.8: "1,234,568", -1234: "-1,234"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %s, want %s", v, got, want)
		}
	}
}

// A bridge_us target compares one bridge's cost over its bare server with
// another's over its own: differences of 1/rate, and of server CPU per
// request beside them.
func TestRenderBridgeCost(t *testing.T) {
	rep := fixtureReports()[0]
	embed := *rep
	embed.Suite, embed.Title, embed.About = "embed", "Embedding", "A Go program."
	embed.Servers = []ServerInfo{{Key: "embed", Label: "Go program"}, {Key: "m0serve", Label: "m0serve"},
		{Key: "bare", Label: "bare net/http", Base: true}, {Key: "fasthttp", Label: "bare fasthttp", Base: true, Group: "fasthttp"}}
	embed.Apps = []AppInfo{{Name: "wsgi", About: "wsgi"}, {Name: "go", About: "go"}}
	embed.Memory = nil
	embed.Targets = []Target{
		{App: "wsgi", Concurrency: 64, Metric: "bridge_us", Server: "embed", Base: "bare", Versus: "m0serve", VersusBase: "fasthttp"},
		{App: "wsgi", Concurrency: 64, Metric: "bridge_us", Server: "m0serve", Base: "fasthttp", Versus: "embed", VersusBase: "bare"},
	}
	embed.Runs = []Run{
		{App: "wsgi", Server: "embed", Concurrency: 64, RPS: 20000, Requests: 200000, CPUSeconds: 8, P99ms: 3},
		{App: "wsgi", Server: "m0serve", Concurrency: 64, RPS: 40000, Requests: 400000, CPUSeconds: 8, P99ms: 2},
		{App: "go", Server: "bare", Concurrency: 64, RPS: 40000, Requests: 400000, CPUSeconds: 8, P99ms: 2},
		{App: "go", Server: "fasthttp", Concurrency: 64, RPS: 100000, Requests: 1000000, CPUSeconds: 8, P99ms: 1},
	}
	page, _ := render([]*Report{&embed}, "bench/results", "")
	pageHas(t, page,
		// 1e6/20,000 - 1e6/40,000 = 25 µs; 1e6/40,000 - 1e6/100,000 = 15;
		// server CPU 40 - 20 and 20 - 8.
		"| Embedding | wsgi | Go program's cost over bare net/http at most m0serve's over bare fasthttp at 64 connections (1/rate differences) | 25.0 µs / 15.0 µs a request (server CPU: 20.0 / 12.0) | **not met** |",
		"| Embedding | wsgi | m0serve's cost over bare fasthttp at most Go program's over bare net/http at 64 connections (1/rate differences) | 15.0 µs / 25.0 µs a request (server CPU: 12.0 / 20.0) | met |",
	)
}

// An rss_kib target compares two rows' peak RSS over their loads: one
// process with two threads against two worker processes, say.
func TestRenderRSSTarget(t *testing.T) {
	rep := fixtureReports()[0]
	ft := *rep
	ft.Suite, ft.Title, ft.About = "freethreaded", "Free-threaded CPython", "Threads."
	ft.Servers = []ServerInfo{{Key: "ft-2", Label: "m0serve, 3.13t, 2 threads", Group: "threads"},
		{Key: "gil-w2", Label: "m0serve, 3.13, --workers 2", Base: true, Group: "threads"}}
	ft.Apps = []AppInfo{{Name: "cpu", About: "cpu"}}
	ft.Memory = nil
	ft.Targets = []Target{
		{App: "cpu", Concurrency: 16, Server: "ft-2", Versus: "gil-w2", Metric: "rss_kib"},
		{App: "cpu", Concurrency: 16, Server: "gil-w2", Versus: "ft-2", Metric: "rss_kib"},
	}
	ft.Runs = []Run{
		{App: "cpu", Server: "ft-2", Concurrency: 16, RPS: 700, Requests: 7000, CPUSeconds: 20, P99ms: 30, RSSPeakKB: 40960},
		{App: "cpu", Server: "gil-w2", Concurrency: 16, RPS: 750, Requests: 7500, CPUSeconds: 20, P99ms: 30, RSSPeakKB: 102400},
	}
	page, _ := render([]*Report{&ft}, "bench/results", "")
	pageHas(t, page,
		"| Free-threaded CPython | cpu | m0serve, 3.13t, 2 threads peak RSS at most m0serve, 3.13, --workers 2's at 16 connections | 40.0 MiB / 100.0 MiB | met |",
		"| Free-threaded CPython | cpu | m0serve, 3.13, --workers 2 peak RSS at most m0serve, 3.13t, 2 threads's at 16 connections | 100.0 MiB / 40.0 MiB | **not met** |",
	)
}

// TestRenderInProcess: the in-process row (the application in a loop, no
// server) is in the table with its rate and CPU and no latency, is the
// reference of no m0 row and no loss, is left out of the charts, and the
// target against it is a per-round ratio.
func TestRenderInProcess(t *testing.T) {
	interleave := "2026-12-04T08:00:00Z"
	rep := &Report{
		Date: "2026-12-04T08:00:00Z", Commit: "abc1234", Machine: Machine{CPUs: 2, Model: "Test CPU", Kernel: "6.1", MemGiB: 24},
		Method: Method{Tool: "wrk", DurationS: 3, WarmupS: 2, ServerCPU: "0", ClientCPU: "1", Threads: 1, TimeoutS: 5, Rounds: 3},
		Suite:  "wsgi", Title: "WSGI", About: "A WSGI application.",
		Servers: []ServerInfo{{Key: "m0serve", Label: "m0serve"}, {Key: "granian", Label: "granian", Peer: true},
			{Key: "inprocess", Label: "the application in-process (no server)", Group: "in-process", InProcess: true}},
		Apps:    []AppInfo{{Name: "flask", About: "Flask"}},
		Targets: []Target{{App: "flask", Concurrency: 64, Server: "m0serve", Versus: "inprocess", Min: 0.75}},
		Runs: []Run{
			{App: "flask", Server: "m0serve", Concurrency: 64, RPS: 14000, Rates: []float64{14000, 13000, 15000}, Interleave: interleave,
				Requests: 42000, P50ms: 4, P99ms: 9, Maxms: 20, CPUSeconds: 3},
			{App: "flask", Server: "granian", Concurrency: 64, RPS: 10000, Rates: []float64{10000, 9000, 11000}, Interleave: interleave,
				Requests: 30000, P50ms: 6, P99ms: 12, Maxms: 30, CPUSeconds: 3},
			{App: "flask", Server: "inprocess", Concurrency: 64, RPS: 21000, Rates: []float64{20000, 21000, 22000}, Interleave: interleave,
				Requests: 63000, CPUSeconds: 3},
		},
	}
	page, charts := render([]*Report{rep}, "bench/results", "")
	pageHas(t, page,
		// Per round 14,000/20,000, 13,000/21,000, 15,000/22,000: 0.70x, 0.62x, 0.68x.
		"| WSGI | flask | m0serve at least 0.75x the application in-process (no server) at 64 connections | 0.68x per round (medians 14,000 / 21,000) | **not met**",
		"| 64 | the application in-process (no server) | 21,000 (20,000-22,000) |  |  |  |  |  |  | 47.6 |",
		"| WSGI | flask | 64 | m0serve | 14,000 | granian | 10,000 | **1.40x** |",
		"Nowhere in this run",
		"- **In-process**: in the WSGI suite,",
	)
	for _, name := range []string{"wsgi-flask.svg", "wsgi-flask-latency.svg"} {
		if !strings.Contains(charts[name], ">m0serve<") || strings.Contains(charts[name], "in-process") {
			t.Errorf("%s must have m0serve and not the in-process row:\n%s", name, charts[name])
		}
	}
}
