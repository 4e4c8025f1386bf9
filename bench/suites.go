package main

// The suites, as data: each is servers × applications × concurrencies.
// A server's command line is a template; the harness fills in
//
//	{m0serve} {bin}   bench/.bin/m0serve, bench/.bin (what the harness built)
//	{venv}            the virtualenv of the Python peers (bench/.venv)
//	{mojo}            the Mojo m0serve's virtualenv (bench/.venv-mojo)
//	{port}            a free port on 127.0.0.1
//	{dir}             the application's directory
//	{module} {callable}
//	{static}          the static suite's files (1k.bin, 1m.bin)
//	{apps}            bench/apps
//	{conf}            a configuration file the server's Config wrote
//
// Every server but the workers and free-threaded suites' runs one worker
// process (beside an idle supervisor where the server has one) pinned to
// CPU 0; the load tool runs pinned to CPU 1. Every suite the harness loads
// itself, pinned or not, is measured in interleaved rounds (rounds.go):
// every server of an application up at once, loaded in turn, round after
// round. The fan-out suite (bench/holds starts each server itself, and
// 10,000 held streams want the machine to themselves) loads one server at
// a time.

import "strings"

// A Suite is one page section.
type Suite struct {
	Name, Title string
	About       string // one paragraph for the page: what is measured
	Tool        string // wrk, wsload (WebSocket echo), holds (SSE fan-out)
	Apps        []App
	Servers     []Server
	Concurrency []int // connections; for holds, held streams
	Unpinned    bool  // servers and the tool share every CPU
	Threads     int   // the load tool's threads (default 1)
	Rate        int   // holds: frames published per second
	Memory      bool  // measure memory per idle connection (holds measures its own)
	Targets     []Target
}

// A Target is a figure m0 promises, checked on the page as met or not:
// m0's rate at least Min times another server's (Versus), or one of m0's
// own figures (Metric: per_conn_kib, p99_ms) at most Max.
type Target struct {
	App         string  `json:"app"`
	Concurrency int     `json:"concurrency"`
	Server      string  `json:"server"` // m0's row
	Versus      string  `json:"versus,omitempty"`
	Min         float64 `json:"min,omitempty"`
	Metric      string  `json:"metric,omitempty"`
	Max         float64 `json:"max,omitempty"`
	// Metric bridge_us: Server's cost over Base (1/rate differences, µs
	// a request, Base's row on the application "go") at most Versus's
	// over VersusBase.
	Base       string `json:"base,omitempty"`
	VersusBase string `json:"versus_base,omitempty"`
	Why        string `json:"why,omitempty"` // where the target comes from, or why it is out of reach
}

// An App is what the servers serve and how a correct answer looks.
type App struct {
	Name, About      string
	Dir              string // template
	Module, Callable string
	Path             string // requested (default /)
	Body             string // the exact body of a correct answer ("" for any)
	Contains         string // or a part of it
	ContentType      string // its Content-Type's prefix ("" for any)
	File             string // static: the file under {static} the answer must equal
}

// A Server is one row of the suite's tables.
type Server struct {
	Key, Label string
	Peer       bool                // a peer: what m0's rows are compared to
	Base       bool                // m0's own baseline (bare net/http, m0serve unmounted, bare fasthttp): compared to where no peer serves the application
	Group      string              // rows are compared only within their group (the workers suite: the worker count)
	Package    string              // the Python distribution (or "nginx", "centrifugo", "go") whose version is reported
	Args       []string            // the command line, a template
	AppArgs    map[string][]string // per application, in place of Args
	Env        []string
	Only       []string          // the applications it serves (all when empty)
	Paths      map[string]string // per application, in place of the App's Path
	Config     func(h *harness, port int, app App) (string, error)
	// InProcess: not a server but the application called in a loop inside
	// one Python process (bench/apps/inprocess.py), loaded by asking it to
	// loop for the load's duration: the rate the application has on its
	// own, which no server passes. It has no latency and no connections.
	InProcess bool
}

func (s *Server) serves(app string) bool {
	if len(s.Only) == 0 {
		return true
	}
	for _, a := range s.Only {
		if a == app {
			return true
		}
	}
	return false
}

func (s *Server) args(app string) []string {
	if a, ok := s.AppArgs[app]; ok {
		return a
	}
	return s.Args
}

const (
	helloWSGI = "Hello, World!\n"
	helloASGI = "Hello, World!"
)

var (
	m0serveWSGI = []string{"{m0serve}", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "{dir}", "{module}:{callable}"}
	m0serveASGI = []string{"{m0serve}", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "{dir}", "--loop", "uvloop", "{module}:{callable}"}
	gunicorn    = func(class string, extra ...string) []string {
		return append([]string{"{venv}/bin/gunicorn", "--bind", "127.0.0.1:{port}", "--chdir", "{dir}", "--workers", "1",
			"--log-level", "warning", "--worker-class", class}, append(extra, "{module}:{callable}")...)
	}
	// --http-socket: the worker speaks HTTP itself (--http would add a
	// router process). It closes every connection after its answer (with
	// one sync worker, keep-alive would let one connection hold it), so
	// the answer says Connection: close and the client opens a new one
	// without counting an error. --listen 1024: its default backlog is
	// 100 (the harness gives every server at least 1,024).
	uwsgi = []string{"{venv}/bin/uwsgi", "--http-socket", "127.0.0.1:{port}", "--chdir", "{dir}", "--module", "{module}:{callable}",
		"--master", "--processes", "1", "--threads", "1", "--listen", "1024", "--add-header", "Connection: close", "--disable-logging"}
	// --blocking-threads 2: the fastest of 1, 2, 4, 8 and the default
	// pinned to one core.
	granianWSGI = []string{"{venv}/bin/granian", "--interface", "wsgi", "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "{dir}",
		"--workers", "1", "--blocking-threads", "2", "--no-access-log", "--log-level", "warning", "{module}:{callable}"}
	granianASGI = []string{"{venv}/bin/granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "{dir}",
		"--workers", "1", "--runtime-threads", "1", "--loop", "uvloop", "--no-access-log", "--log-level", "warning", "{module}:{callable}"}
	uvicorn = []string{"{venv}/bin/uvicorn", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "{dir}", "--workers", "1",
		"--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning", "{module}:{callable}"}
	uvicornWSGI = append(append([]string{}, uvicorn[:len(uvicorn)-1]...), "--interface", "wsgi", "{module}:{callable}")
	// The Mojo m0serve (PyPI's m0serve 1.16.0, the original of this
	// design), in a virtualenv of its own: its import name is our Python
	// package's. Its defaults otherwise (one worker, blocking-threads auto:
	// 2, its own event loop for ASGI, no access log); but
	// --max-keepalive-requests 0: its default closes a connection after
	// 1,000 requests, which no other server here does.
	mojo = []string{"{mojo}/bin/m0serve", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "{dir}", "--max-keepalive-requests", "0", "{module}:{callable}"}
	// The Go handler on a bare fasthttp.Server (bench/gohost).
	bareFasthttp = []string{"{bin}/gohost", "-mode", "bare", "-port", "{port}"}
	// hypercorn has no --chdir: it imports the module from the path given.
	// --backlog 1024: its default is 100, and 1,024 connections arrive at once.
	hypercorn = []string{"{venv}/bin/hypercorn", "--bind", "127.0.0.1:{port}", "--workers", "1", "--worker-class", "uvloop",
		"--backlog", "1024", "--log-level", "warning", "{dir}/{module}:{callable}"}
)

// cpuApp and flaskJSON are the applications of the suites that compare
// one process's ways to more cores (free-threaded CPython, subinterpreters)
// with worker processes: a pure-Python loop, and a Flask view.
var (
	cpuApp        = App{Name: "cpu", About: "bench/apps/cpu_bound.py: 20,000 iterations of an integer recurrence in pure Python, `GET /`", Dir: "{apps}", Module: "cpu_bound", Callable: "application", Body: "1431330791\n"}
	starletteJSON = App{Name: "starlette", About: "bench/apps/starlette_json.py: Starlette, `GET /json`", Dir: "{apps}", Module: "starlette_json", Callable: "app", Path: "/json", Body: `{"message":"Hello, World!"}`, ContentType: "application/json"}
	flaskJSON     = App{Name: "flask", About: "examples/flask_app: Flask, `GET /json`", Dir: "{examples}/flask_app", Module: "app", Callable: "app", Path: "/json", Contains: `"hello":"world"`, ContentType: "application/json"}
)

func suites() []Suite {
	return []Suite{
		{
			Name: "wsgi", Title: "WSGI", Memory: true, Tool: "wrk",
			About: "A WSGI application behind each server: the hello world (the server's own cost), a Flask view answering JSON, and a Django page rendered from a template with the ORM (the 20 newest of 100 guestbook entries, SQLite, DEBUG off). Every server has one worker process: gunicorn sync and uWSGI (one process, one thread) then serve one request at a time and close each connection after its answer, as they are built to; they are usually run with several processes (2 x cores + 1), which is the workers suite's question, not this one's.",
			Apps: []App{
				{Name: "hello", About: "examples/hello: PEP 3333 hello world, `GET /`", Dir: "{examples}/hello", Module: "hello", Callable: "application", Body: helloWSGI},
				flaskJSON,
				{Name: "django", About: "examples/django_site: Django template and ORM page, `GET /recent`", Dir: "{examples}/django_site", Module: "mysite.wsgi", Callable: "application", Path: "/recent", Contains: "100 entries in all; the 20 newest:", ContentType: "text/html"},
			},
			Servers: []Server{
				{Key: "m0serve", Label: "m0serve", Args: m0serveWSGI},
				{Key: "gunicorn-sync", Label: "gunicorn sync", Peer: true, Package: "gunicorn", Args: gunicorn("sync")},
				{Key: "gunicorn-gthread", Label: "gunicorn gthread (8 threads)", Peer: true, Package: "gunicorn", Args: gunicorn("gthread", "--threads", "8")},
				{Key: "uwsgi", Label: "uWSGI", Peer: true, Package: "uWSGI", Args: uwsgi},
				{Key: "granian", Label: "granian", Peer: true, Package: "granian", Args: granianWSGI},
				{Key: "m0serve-mojo", Label: "m0serve 1.16 (Mojo)", Peer: true, Package: "m0serve-mojo", Args: mojo},
				{Key: "inprocess", Label: "the application in-process (no server)", InProcess: true, Group: "in-process", Only: []string{"flask", "django"},
					Args: []string{"{venv}/bin/python", "{apps}/inprocess.py", "--port", "{port}", "--dir", "{dir}", "{module}:{callable}"}},
			},
			Concurrency: []int{1, 64, 1024},
			Targets: append([]Target{
				{App: "flask", Concurrency: 64, Server: "m0serve", Versus: "inprocess", Min: 0.75,
					Why: "the limit: the same view called in a loop in one Python process, in the same rounds; what a request costs beyond it is the server's and the kernel's"},
				{App: "hello", Concurrency: 64, Server: "m0serve", Versus: "uwsgi", Min: 2.5},
				{App: "hello", Concurrency: 64, Server: "m0serve", Versus: "gunicorn-gthread", Min: 4},
				{App: "django", Concurrency: 64, Server: "m0serve", Versus: "granian", Min: 1.0},
				{App: "django", Concurrency: 64, Server: "m0serve", Versus: "gunicorn-gthread", Min: 1.1,
					Why: "On this page libpython takes about 81% of the time, SQLite 6%, the kernel 6%, m0's Go code and the Go runtime about 1% (perf record of the pinned process): no server can be much more than a few percent ahead of another that runs the same Python."},
			}, leadTargets("m0serve", "granian", []string{"hello", "flask", "django"})...),
		},
		{
			Name: "asgi", Title: "ASGI", Memory: true, Tool: "wrk",
			About: "An ASGI application behind each server, every one on uvloop: a raw ASGI hello world, and a FastAPI route and a Starlette route answering JSON.",
			Apps: []App{
				{Name: "hello", About: "bench/apps/hello_asgi.py: raw ASGI, `GET /`", Dir: "{apps}", Module: "hello_asgi", Callable: "app", Body: helloASGI, ContentType: "text/plain"},
				{Name: "fastapi", About: "bench/apps/fastapi_json.py: FastAPI, `GET /json`", Dir: "{apps}", Module: "fastapi_json", Callable: "app", Path: "/json", Body: `{"message":"Hello, World!"}`, ContentType: "application/json"},
				starletteJSON,
			},
			Servers: []Server{
				{Key: "m0serve", Label: "m0serve", Args: m0serveASGI},
				// The inverted loop (docs/asgi.md): the network on the loop's thread, for one usable CPU.
				{Key: "m0serve-inverted", Label: "m0serve (M0_INVERTED=1)", Args: m0serveASGI, Env: []string{"M0_INVERTED=1"}},
				{Key: "uvicorn", Label: "uvicorn (uvloop, httptools)", Peer: true, Package: "uvicorn", Args: uvicorn},
				{Key: "gunicorn-uvicorn", Label: "gunicorn + uvicorn worker", Peer: true, Package: "gunicorn", Args: gunicorn("uvicorn.workers.UvicornWorker")},
				{Key: "granian", Label: "granian", Peer: true, Package: "granian", Args: granianASGI},
				{Key: "hypercorn", Label: "hypercorn", Peer: true, Package: "hypercorn", Args: hypercorn},
				{Key: "m0serve-mojo", Label: "m0serve 1.16 (Mojo)", Peer: true, Package: "m0serve-mojo", Args: mojo},
			},
			Concurrency: []int{1, 64, 1024},
			Targets:     leadTargets("m0serve", "uvicorn", []string{"hello", "fastapi", "starlette"}),
		},
		{
			Name: "static", Title: "Static files", Tool: "wrk",
			About: "The same two files of random bytes under `/static/`: m0serve's `--static` in front of an ASGI application, nginx (sendfile, one worker, no access log) and Go's `http.FileServer`.",
			Apps: []App{
				{Name: "1k", About: "`GET /static/1k.bin`, 1,024 bytes", Dir: "{static}", Path: "/static/1k.bin", File: "1k.bin"},
				{Name: "1m", About: "`GET /static/1m.bin`, 1,048,576 bytes", Dir: "{static}", Path: "/static/1m.bin", File: "1m.bin"},
			},
			Servers: []Server{
				{Key: "m0serve", Label: "m0serve --static", Args: []string{"{m0serve}", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "{apps}", "--static", "/static={static}", "hello_asgi:app"}},
				{Key: "nginx", Label: "nginx", Peer: true, Package: "nginx", Args: []string{"{nginx}", "-p", "{confdir}/", "-e", "{confdir}/error.log", "-c", "{conf}"}, Config: nginxConfig},
				{Key: "fileserver", Label: "Go http.FileServer", Peer: true, Package: "go", Args: []string{"{bin}/fileserver", "-host", "127.0.0.1", "-port", "{port}", "-dir", "{static}"}},
				{Key: "m0serve-mojo", Label: "m0serve 1.16 (Mojo) --static", Peer: true, Package: "m0serve-mojo",
					Args: []string{"{mojo}/bin/m0serve", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "{apps}", "--max-keepalive-requests", "0", "--static", "/static={static}", "hello_asgi:app"}},
			},
			Concurrency: []int{1, 64, 1024},
			Targets: []Target{
				{App: "1k", Concurrency: 64, Server: "m0serve", Versus: "nginx", Min: 1.0},
				{App: "1m", Concurrency: 64, Server: "m0serve", Versus: "nginx", Min: 1.0,
					Why: "wrk is the ceiling here (98% of its core for every server): the rate says what each server's way of sending costs the client."},
				// The same file every request: CPU per request is CPU per MiB.
				{App: "1k", Concurrency: 64, Server: "m0serve", Versus: "nginx", Metric: "cpu_us"},
				{App: "1m", Concurrency: 64, Server: "m0serve", Versus: "nginx", Metric: "cpu_us",
					Why: "On loopback the receive of the sender's segments runs in the sender's context: corked, m0serve does the client's share of it (docs/profiles.md)."},
			},
		},
		{
			Name: "websocket", Title: "WebSocket echo", Memory: true, Tool: "wsload",
			About: "A raw ASGI application echoing every WebSocket message; each connection sends a 32-byte text message and waits for its echo before the next (bench/.bin/bench wsload, gorilla/websocket). Messages per second and the round trip.",
			Apps: []App{
				{Name: "echo", About: "bench/apps/ws_echo.py: raw ASGI WebSocket echo, `/ws`", Dir: "{apps}", Module: "ws_echo", Callable: "app", Path: "/ws"},
			},
			Servers: []Server{
				{Key: "m0serve", Label: "m0serve", Args: m0serveASGI},
				{Key: "uvicorn", Label: "uvicorn (websockets)", Peer: true, Package: "uvicorn", Args: append(append([]string{}, uvicorn[:len(uvicorn)-1]...), "--ws", "websockets", "{module}:{callable}")},
				{Key: "granian", Label: "granian", Peer: true, Package: "granian", Args: granianASGI},
				{Key: "hypercorn", Label: "hypercorn", Peer: true, Package: "hypercorn", Args: hypercorn},
				{Key: "m0serve-mojo", Label: "m0serve 1.16 (Mojo)", Peer: true, Package: "m0serve-mojo", Args: mojo},
			},
			Concurrency: []int{1, 64, 1024},
		},
		{
			Name: "fanout", Title: "SSE fan-out", Tool: "holds", Rate: 1000,
			About: "Server-Sent Events held by the server and fed by publishes: the streams spread over 100 channels, 1,000 frames/s published over HTTP for 10 s after a 3 s warm-up (bench/holds). m0serve --realtime holds them for a plain WSGI application (bench/apps/realtime_bench.py, `M0-Hold: stream`, `m0pub.publish`); Centrifugo, a Go server made for fan-out, through its uni_sse transport and HTTP publish API. Latency is publish to receive, measured at the clients; memory is the server's RSS growth over the held streams.",
			Apps: []App{
				{Name: "fanout", About: "SSE streams over 100 channels, 1,000 frames/s"},
			},
			Servers: []Server{
				{Key: "m0serve", Label: "m0serve --realtime"},
				{Key: "centrifugo", Label: "Centrifugo", Peer: true, Package: "centrifugo"},
			},
			Concurrency: []int{1000, 10000},
			Targets: []Target{
				{App: "fanout", Concurrency: 10000, Server: "m0serve", Metric: "per_conn_kib", Max: 12,
					Why: "Centrifugo documents about 27 KiB per idle connection, 10.9 KiB tuned."},
				{App: "fanout", Concurrency: 10000, Server: "m0serve", Metric: "p99_ms", Max: 50,
					Why: "100,000 socket writes a second on loopback cost more than one core (the kernel's send and the receiver's side of each write are about three quarters of the server's time): pinned to one core, neither server keeps up, and the latency is queueing."},
				{App: "fanout", Concurrency: 1000, Server: "m0serve", Metric: "p99_ms", Versus: "centrifugo"},
				{App: "fanout", Concurrency: 10000, Server: "m0serve", Metric: "p99_ms", Versus: "centrifugo"},
			},
		},
		{
			Name: "embed", Title: "Embedding (a Go program on net/http)", Tool: "wrk",
			About: "A Go program (bench/embed) that mounts the WSGI hello at `/wsgi/`, the ASGI hello at `/asgi/` and a Go handler at `/go` on one `http.ServeMux`, served by a plain `net/http` server: the path of a Go program that embeds m0. Beside it, the same applications under m0serve, granian and uvicorn; what a Go team runs today instead, a `net/http` program forwarding every request with `httputil.ReverseProxy` (idle connections kept, copy buffers pooled) to granian, both on the one pinned core; and the Go handler alone on a bare `net/http` server and on a bare `fasthttp` server, from which each bridge's own cost is taken (1/rate differences, µs a request).",
			Apps: []App{
				{Name: "wsgi", About: "examples/hello (WSGI)", Dir: "{examples}/hello", Module: "hello", Callable: "application", Body: helloWSGI},
				{Name: "asgi", About: "bench/apps/hello_asgi.py (raw ASGI)", Dir: "{apps}", Module: "hello_asgi", Callable: "app", Body: helloASGI},
				{Name: "go", About: "a Go handler writing the same body", Body: helloWSGI},
			},
			Servers: []Server{
				{Key: "embed", Label: "Go program (net/http)", Package: "go",
					Args:  []string{"{bin}/embed", "-addr", "127.0.0.1:{port}", "-dir", "{examples}/hello", "-wsgi", "hello:application", "-asgi-dir", "{apps}", "-asgi", "hello_asgi:app"},
					Paths: map[string]string{"wsgi": "/wsgi/", "asgi": "/asgi/", "go": "/go"}},
				{Key: "m0serve", Label: "m0serve", Only: []string{"wsgi", "asgi"}, AppArgs: map[string][]string{"wsgi": m0serveWSGI, "asgi": m0serveASGI}},
				{Key: "granian", Label: "granian", Peer: true, Package: "granian", Only: []string{"wsgi", "asgi"}, AppArgs: map[string][]string{"wsgi": granianWSGI, "asgi": granianASGI}},
				{Key: "uvicorn", Label: "uvicorn", Peer: true, Package: "uvicorn", Only: []string{"asgi"}, Args: uvicorn},
				{Key: "m0serve-mojo", Label: "m0serve 1.16 (Mojo)", Peer: true, Package: "m0serve-mojo", Only: []string{"wsgi", "asgi"}, Args: mojo},
				{Key: "proxy", Label: "net/http reverse proxy to granian", Peer: true, Package: "granian", Only: []string{"wsgi", "asgi"},
					AppArgs: map[string][]string{"wsgi": proxied(granianWSGI), "asgi": proxied(granianASGI)}},
				{Key: "bare", Label: "bare net/http (no bridge)", Base: true, Package: "go", Only: []string{"go"}, Args: []string{"{bin}/embed", "-bare", "-addr", "127.0.0.1:{port}"}, Paths: map[string]string{"go": "/go"}},
				{Key: "fasthttp", Label: "bare fasthttp (no bridge)", Base: true, Group: "fasthttp", Package: "go", Only: []string{"go"}, Args: bareFasthttp},
			},
			Concurrency: []int{64},
			Targets: []Target{
				{App: "wsgi", Concurrency: 64, Server: "embed", Versus: "granian", Min: 0.9},
				{App: "asgi", Concurrency: 64, Server: "embed", Versus: "granian", Min: 1.0},
				{App: "asgi", Concurrency: 64, Server: "embed", Versus: "uvicorn", Min: 1.0},
				{App: "go", Concurrency: 64, Server: "embed", Versus: "bare", Min: 0.95},
				{App: "wsgi", Concurrency: 64, Server: "embed", Versus: "proxy", Min: 1.5},
				{App: "asgi", Concurrency: 64, Server: "embed", Versus: "proxy", Min: 1.5},
				{App: "wsgi", Concurrency: 64, Metric: "bridge_us", Server: "embed", Base: "bare", Versus: "m0serve", VersusBase: "fasthttp"},
				{App: "asgi", Concurrency: 64, Metric: "bridge_us", Server: "embed", Base: "bare", Versus: "m0serve", VersusBase: "fasthttp"},
			},
		},
		{
			Name: "mounts", Title: "Mounts", Tool: "wrk",
			About: "m0serve serving the WSGI and the ASGI hello as its application at `/`, and mounted under a prefix (`--mount /a=SPEC`, `GET /a/`): what routing by prefix costs.",
			Apps: []App{
				{Name: "wsgi", About: "examples/hello (WSGI)", Dir: "{examples}/hello", Module: "hello", Callable: "application", Body: helloWSGI},
				{Name: "asgi", About: "bench/apps/hello_asgi.py (raw ASGI)", Dir: "{apps}", Module: "hello_asgi", Callable: "app", Body: helloASGI},
			},
			Servers: []Server{
				{Key: "unmounted", Label: "m0serve (at /)", Base: true, AppArgs: map[string][]string{"wsgi": m0serveWSGI, "asgi": m0serveASGI}},
				{Key: "mounted", Label: "m0serve (--mount /a=...)",
					AppArgs: map[string][]string{
						"wsgi": {"{m0serve}", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "{dir}", "--mount", "/a={module}:{callable}"},
						"asgi": {"{m0serve}", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "{dir}", "--loop", "uvloop", "--mount", "/a={module}:{callable}"},
					},
					Paths: map[string]string{"wsgi": "/a/", "asgi": "/a/"}},
			},
			Concurrency: []int{64},
			Targets: []Target{
				{App: "wsgi", Concurrency: 64, Server: "mounted", Versus: "unmounted", Min: 0.97},
				{App: "asgi", Concurrency: 64, Server: "mounted", Versus: "unmounted", Min: 0.97},
			},
		},
		{
			Name: "gohost", Title: "Go host", Tool: "wrk",
			About: "One Go handler (bench/gohost) on the m0 host (`host.Serve`: the host's flags, limits, strict reading and drain around fasthttp) and on a bare `fasthttp.Server`: what the host adds to a Go program that hands it its handler.",
			Apps: []App{
				{Name: "go", About: "a Go handler writing `Hello, World!`", Body: helloWSGI},
			},
			Servers: []Server{
				{Key: "host", Label: "m0 host", Args: []string{"{bin}/gohost", "-mode", "host", "-port", "{port}"}},
				{Key: "fasthttp", Label: "bare fasthttp", Base: true, Package: "go", Args: bareFasthttp},
			},
			Concurrency: []int{64},
			Targets:     []Target{{App: "go", Concurrency: 64, Server: "host", Versus: "fasthttp", Min: 0.95}},
		},
		{
			Name: "workers", Title: "Workers", Tool: "wrk", Unpinned: true, Threads: 2,
			About: "The WSGI hello with one and two worker processes, on both CPUs, nothing pinned, wrk -t2 beside the servers: what a second worker buys on this machine, and the server's CPU time per request (every process of its session).",
			Apps: []App{
				{Name: "hello", About: "examples/hello (WSGI)", Dir: "{examples}/hello", Module: "hello", Callable: "application", Body: helloWSGI},
			},
			Servers: []Server{
				{Key: "m0serve-1", Group: "1 worker", Label: "m0serve, 1 worker", Args: m0serveWSGI},
				{Key: "m0serve-2", Group: "2 workers", Label: "m0serve --workers 2", Args: workers(m0serveWSGI, "--workers", "2")},
				{Key: "granian-1", Group: "1 worker", Label: "granian, 1 worker", Peer: true, Package: "granian", Args: granianWSGI},
				{Key: "granian-2", Group: "2 workers", Label: "granian, 2 workers", Peer: true, Package: "granian", Args: workers(granianWSGI, "--workers", "2")},
				{Key: "gunicorn-1", Group: "1 worker", Label: "gunicorn gthread, 1 worker", Peer: true, Package: "gunicorn", Args: gunicorn("gthread", "--threads", "8")},
				{Key: "gunicorn-2", Group: "2 workers", Label: "gunicorn gthread, 2 workers", Peer: true, Package: "gunicorn", Args: workers(gunicorn("gthread", "--threads", "8"), "--workers", "2")},
				{Key: "uvicorn-1", Group: "1 worker", Label: "uvicorn --interface wsgi, 1 worker", Peer: true, Package: "uvicorn", Args: uvicornWSGI},
				{Key: "uvicorn-2", Group: "2 workers", Label: "uvicorn --interface wsgi, 2 workers", Peer: true, Package: "uvicorn", Args: workers(uvicornWSGI, "--workers", "2")},
				{Key: "m0serve-mojo-1", Group: "1 worker", Label: "m0serve 1.16 (Mojo), 1 worker", Peer: true, Package: "m0serve-mojo", Args: mojo},
				{Key: "m0serve-mojo-2", Group: "2 workers", Label: "m0serve 1.16 (Mojo) --workers 2", Peer: true, Package: "m0serve-mojo", Args: workers(mojo, "--workers", "2")},
			},
			Concurrency: []int{64, 1024},
		},
		{
			Name: "freethreaded", Title: "Free-threaded CPython", Tool: "wrk", Unpinned: true, Threads: 2,
			About: "What a free-threaded CPython (3.13t, GIL off) gives one m0serve process on two cores: one and two pool threads on 3.13t, against a GIL build of 3.13 with one thread and with `--workers 2`, and gunicorn's gthread worker with two threads on the same 3.13t. m0serve loads the Python first on its PATH: bench/.venv-3.13t (the free-threaded build scripts/freethreaded makes) or bench/.venv-3.13 (a GIL build), both from bench/requirements-ft.txt. The applications' .pyc files are written before the suite (compileall), so that every server loads the same code: a module 3.13t compiles from source without one contends on its constants, which m0serve avoids and gunicorn does not (docs/running.md, \"Modules without a .pyc\"). Nothing is pinned; wrk -t2 shares the cores, and the servers are still up together and loaded in turn. RSS is the peak over the load, of every process of the server's session. On two cores the Flask view measures each build's cost a request more than scaling: m0serve's Go side and wrk take much of the second core at these rates.",
			Apps:  []App{cpuApp, flaskJSON},
			Servers: []Server{
				{Key: "ft-1", Group: "1 thread", Label: "m0serve, 3.13t, 1 thread", Args: threads(m0serveWSGI, "1"), Env: onPython("{ftvenv}")},
				{Key: "ft-2", Group: "2 threads", Label: "m0serve, 3.13t, 2 threads", Args: threads(m0serveWSGI, "2"), Env: onPython("{ftvenv}")},
				{Key: "gil-1", Group: "1 thread", Label: "m0serve, 3.13, 1 thread", Base: true, Args: threads(m0serveWSGI, "1"), Env: onPython("{gilvenv}")},
				{Key: "gil-w2", Group: "2 threads", Label: "m0serve, 3.13, --workers 2", Base: true, Args: workers(threads(m0serveWSGI, "1"), "--workers", "2"), Env: onPython("{gilvenv}")},
				{Key: "gunicorn-ft", Group: "2 threads", Label: "gunicorn gthread, 3.13t, 2 threads", Peer: true, Package: "gunicorn",
					Args: onVenv(gunicorn("gthread", "--threads", "2"), "{ftvenv}")},
			},
			Concurrency: []int{16},
			Targets: []Target{
				{App: "cpu", Concurrency: 16, Server: "ft-2", Versus: "ft-1", Min: 1.8},
				{App: "cpu", Concurrency: 16, Server: "ft-2", Versus: "gil-w2", Min: 0.9},
				{App: "flask", Concurrency: 16, Server: "ft-2", Versus: "gil-w2", Min: 0.9},
				{App: "cpu", Concurrency: 16, Server: "ft-2", Versus: "gil-w2", Metric: "rss_kib"},
				{App: "flask", Concurrency: 16, Server: "ft-2", Versus: "gil-w2", Metric: "rss_kib"},
			},
		},
		{
			Name: "interpreters", Title: "Subinterpreters", Tool: "wrk", Unpinned: true, Threads: 2,
			About: "What `--interpreters N` (N subinterpreters, each with its own GIL, in one process) gives m0serve on two cores with an ordinary GIL build, CPython 3.13 (bench/.venv-3.13, from bench/requirements-ft.txt): two interpreters against one, against `--workers 2` (two processes) and against today's main interpreter alone; one pool thread in each. The difference between `--interpreters 1` and the main interpreter is what running a request in a subinterpreter costs. Starlette, an ASGI application, runs on the buffered path in every row with `--blocking-threads 1` (one request at a time an interpreter or process, each thread that runs one with its own asyncio loop), and on the executor (one asyncio loop a process or an interpreter, the default) in `--workers 2, executor` and `--interpreters 2, executor`; no row has uvloop (it does not load in a subinterpreter). Nothing is pinned; wrk -t2 shares the cores, and the servers are still up together and loaded in turn. RSS is the peak over the load, of every process of the server's session.",
			Apps:  []App{cpuApp, flaskJSON, starletteJSON},
			Servers: []Server{
				{Key: "main-1", Group: "1 interpreter", Label: "m0serve, main interpreter", Base: true, Args: threads(m0serveWSGI, "1"), Env: onPython("{gilvenv}")},
				{Key: "interp-1", Group: "1 interpreter", Label: "m0serve --interpreters 1", Args: workers(threads(m0serveWSGI, "1"), "--interpreters", "1"), Env: onPython("{gilvenv}")},
				{Key: "interp-2", Group: "2 interpreters", Label: "m0serve --interpreters 2", Args: workers(threads(m0serveWSGI, "1"), "--interpreters", "2"), Env: onPython("{gilvenv}")},
				{Key: "workers-2", Group: "2 interpreters", Label: "m0serve --workers 2", Base: true, Args: workers(threads(m0serveWSGI, "1"), "--workers", "2"), Env: onPython("{gilvenv}")},
				{Key: "workers-2-loop", Group: "2 interpreters", Label: "m0serve --workers 2, executor", Only: []string{"starlette"}, Args: workers(m0serveWSGI, "--workers", "2"), Env: onPython("{gilvenv}")},
				{Key: "interp-2-loop", Group: "2 interpreters", Label: "m0serve --interpreters 2, executor", Only: []string{"starlette"}, Args: workers(m0serveWSGI, "--interpreters", "2"), Env: onPython("{gilvenv}")},
			},
			Concurrency: []int{1, 16},
			Targets: []Target{
				{App: "cpu", Concurrency: 16, Server: "interp-2", Versus: "interp-1", Min: 1.8},
				{App: "cpu", Concurrency: 16, Server: "interp-2", Versus: "workers-2", Min: 0.9},
				{App: "flask", Concurrency: 16, Server: "interp-2", Versus: "workers-2", Min: 0.9},
				{App: "cpu", Concurrency: 16, Server: "interp-2", Versus: "workers-2", Metric: "rss_kib"},
				{App: "flask", Concurrency: 16, Server: "interp-2", Versus: "workers-2", Metric: "rss_kib"},
				{App: "flask", Concurrency: 1, Server: "interp-1", Versus: "main-1", Metric: "cpu_us"},
				{App: "starlette", Concurrency: 16, Server: "interp-2", Versus: "workers-2", Min: 0.9},
				{App: "starlette", Concurrency: 16, Server: "interp-2", Versus: "workers-2-loop", Min: 0.9},
				{App: "starlette", Concurrency: 16, Server: "interp-2-loop", Versus: "workers-2-loop", Min: 0.9},
				{App: "starlette", Concurrency: 1, Server: "interp-2-loop", Versus: "workers-2-loop", Min: 0.9},
			},
		},
	}
}

// threads is m0serve's command line with --blocking-threads N.
func threads(args []string, n string) []string {
	return workers(args, "--blocking-threads", n)
}

// onPython is the environment of an m0serve that loads the Python of the
// virtualenv venv (a template): its bin first on PATH.
func onPython(venv string) []string {
	return []string{"PATH=" + venv + "/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV=" + venv}
}

// onVenv is a peer's command line run from the virtualenv venv rather than
// bench/.venv.
func onVenv(args []string, venv string) []string {
	out := append([]string{}, args...)
	out[0] = strings.Replace(out[0], "{venv}", venv, 1)
	return out
}

// workers is a command line with FLAG's value replaced, or FLAG VALUE put
// before the last argument (the application) when it has none.
// leadTargets are what m0 means to lead by on each application: a rate at
// least 1.10x the best peer's and a server CPU per request at most the best
// peer's, at 1, 64 and 1,024 connections, and memory per idle connection
// at most that of the peer that holds the least among the usual ones
// (granian for WSGI, uvicorn for ASGI).
func leadTargets(m0, memoryPeer string, apps []string) []Target {
	var out []Target
	for _, a := range apps {
		for _, c := range []int{1, 64, 1024} {
			out = append(out,
				Target{App: a, Concurrency: c, Server: m0, Versus: "best", Min: 1.1},
				Target{App: a, Concurrency: c, Server: m0, Versus: "best", Metric: "cpu_us"})
		}
		out = append(out, Target{App: a, Concurrency: holdConns, Server: m0, Versus: memoryPeer, Metric: "per_conn_kib"})
	}
	return out
}

// proxied is a peer's command line as the backend of bench/embed -proxy:
// its port is the one the proxy chooses ("@port").
func proxied(backend []string) []string {
	out := []string{"{bin}/embed", "-proxy", "-addr", "127.0.0.1:{port}", "--"}
	for _, a := range backend {
		out = append(out, strings.ReplaceAll(a, "{port}", "@port"))
	}
	return out
}

func workers(args []string, flag, value string) []string {
	out := append([]string{}, args...)
	for i := range out[:len(out)-1] {
		if out[i] == flag {
			out[i+1] = value
			return out
		}
	}
	last := out[len(out)-1]
	return append(append(out[:len(out)-1], flag, value), last)
}

func suiteOrder() []string {
	var names []string
	for _, s := range suites() {
		names = append(names, s.Name)
	}
	return names
}

func suiteByName(name string) (Suite, bool) {
	for _, s := range suites() {
		if s.Name == name {
			return s, true
		}
	}
	return Suite{}, false
}
