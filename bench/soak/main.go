// Command soak measures m0serve under long load, slow clients, faults and
// exhaustion, on each CPython it is given, and prints one result line per
// run:
//
//	go build -o .bin/ ./cmd/m0serve
//	go run ./bench/soak -suite wsgi,asgi,ws,sse -python 3.10,3.11,3.12,3.13 -n 1000000
//	go run ./bench/soak -suite slow,faults,fds,huge -python 3.11
//
// Suites:
//
//   - wsgi, asgi: n GET /hello on keep-alive connections; ws: n WebSocket
//     messages echoed by an ASGI application; sse: n frames received on
//     held SSE streams (--realtime), published at -rate a second. The
//     server's RSS (its processes' VmRSS, children included) is sampled
//     every second; growth is from the end of the warm-up (the first
//     tenth) to the end.
//   - slow: the p99 of normal requests idle, then with -slow connections of
//     each kind held open: headers sent a byte at a time, a body sent a
//     byte at a time, and readers that never read their response.
//   - faults: load while a fault happens (kill -9 of a worker, SIGTERM of
//     the server, an application that raises on every tenth request, a
//     view that sleeps past the drain bound, clients that leave mid upload
//     and mid download), each request's failure attributed to the fault or
//     counted as unexplained.
//   - fds: the server under a low RLIMIT_NOFILE (prlimit), its descriptors
//     exhausted with connections: the accept-retry lines and CPU while
//     exhausted, and a request served once the connections close.
//   - ops: a steady load at half of capacity while workers are recycled,
//     SIGHUP, SIGTTIN, SIGTTOU and SIGUSR2 arrive, beside gunicorn and
//     granian (from bench/.venv), with held SSE streams counted frame by
//     frame under m0serve (ops.go).
//   - huge: a 1 GiB streamed response to a reader that reads slowly and to
//     one that never reads, WSGI and ASGI: the server's RSS meanwhile.
//
// The applications are tests/e2e/apps/reliability_app.py. Every figure is
// printed, nothing is asserted: the deterministic checks are
// tests/e2e/test_reliability.py.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	m0serve, apps, root, workdir string
	n                            int64
	conns, streams, rate, slow   int
	nofile                       int
	slowFor                      time.Duration
	metrics                      bool
	fdWorkers                    []int
	slowKinds                    []string
}

func main() {
	var cfg config
	var suites, minors string
	flag.StringVar(&suites, "suite", "wsgi,asgi,ws,sse", "suites to run, in order: wsgi, asgi, ws, sse, slow, faults, fds, huge, ops")
	flag.StringVar(&minors, "python", "3.10,3.11,3.12,3.13", "CPython minors, each served from .venv/py3.X")
	flag.StringVar(&cfg.m0serve, "m0serve", ".bin/m0serve", "the m0serve binary")
	flag.StringVar(&cfg.root, "root", ".", "the repository (its .venv and tests/e2e/apps)")
	flag.Int64Var(&cfg.n, "n", 1_000_000, "requests, messages or frames per soak run")
	flag.IntVar(&cfg.conns, "c", 32, "client connections of a soak run")
	flag.IntVar(&cfg.streams, "streams", 100, "held SSE streams of the sse suite")
	flag.IntVar(&cfg.rate, "rate", 500, "frames published a second in the sse suite")
	flag.IntVar(&cfg.slow, "slow", 1000, "connections of each slow kind in the slow suite")
	flag.DurationVar(&cfg.slowFor, "slow-for", 15*time.Second, "how long the slow suite measures each phase")
	flag.IntVar(&cfg.nofile, "nofile", 256, "RLIMIT_NOFILE of the server in the fds suite")
	flag.BoolVar(&cfg.metrics, "metrics", false, "soak suites: serve with --metrics and report the Go heap at each tenth")
	var fdWorkers, slowKinds string
	flag.StringVar(&slowKinds, "slow-kinds", "slowloris-headers,slow-body,never-reads", "the slow suite's kinds of connection")
	flag.StringVar(&fdWorkers, "fd-workers", "1,2", "worker counts of the fds suite")
	flag.Parse()
	for _, w := range strings.Split(fdWorkers, ",") {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-fd-workers %q: want counts such as 1,2", fdWorkers))
		}
		cfg.fdWorkers = append(cfg.fdWorkers, n)
	}
	cfg.slowKinds = strings.Split(slowKinds, ",")
	for _, p := range []*string{&cfg.m0serve, &cfg.root} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			fatal(err)
		}
		*p = abs
	}
	cfg.apps = filepath.Join(cfg.root, "tests", "e2e", "apps")
	if _, err := os.Stat(cfg.m0serve); err != nil {
		fatal(fmt.Errorf("%v (build it: go build -o .bin/ ./cmd/m0serve)", err))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < uint64(3*cfg.slow+1024) {
		fatal(fmt.Errorf("the slow suite holds %d connections: raise the open-file limit to %d (ulimit -n)",
			3*cfg.slow, 3*cfg.slow+1024))
	}
	pys, err := pythons(cfg.root, minors)
	if err != nil {
		fatal(err)
	}
	dir, err := os.MkdirTemp("", "soak-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg.workdir = dir
	failed := false
	for _, suite := range strings.Split(suites, ",") {
		for _, py := range pys {
			fmt.Fprintf(os.Stderr, "==> %s on CPython %s\n", suite, py.version)
			lines, err := runSuite(&cfg, suite, py)
			for _, l := range lines {
				fmt.Println(l)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "soak: %s on %s: %v\n", suite, py.version, err)
				failed = true
			}
		}
	}
	if failed {
		os.Exit(1)
	}
}

func runSuite(cfg *config, suite string, py *python) ([]string, error) {
	switch suite {
	case "wsgi", "asgi", "ws", "sse":
		r, err := soak(cfg, suite, py)
		if r == nil {
			return nil, err
		}
		return []string{r.line()}, err
	case "slow":
		return slowSuite(cfg, py)
	case "faults":
		return faultSuite(cfg, py)
	case "fds":
		return fdSuite(cfg, py)
	case "huge":
		return hugeSuite(cfg, py)
	case "ops":
		return opsSuite(cfg, py)
	}
	return nil, fmt.Errorf("unknown suite %q", suite)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "soak:", err)
	os.Exit(1)
}
