package main

// The ops suite: a steady load at half of a server's capacity while its
// workers are replaced under it, the operations a production deployment
// relies on, side by side with gunicorn and granian in one run.
//
// For each server, with two workers on bench/apps/ops_app.py (GET /):
//
//  1. capacity: 64 keep-alive connections as fast as they go for 3 s;
//  2. baseline: 20 s at half that rate (paced: request i is due at
//     start + i/rate, its latency counted from when it was due), no change;
//  3. changes: 60 s at the same rate on a server started with its
//     recycling (m0serve and gunicorn --max-requests N, N a worker's two
//     seconds of requests, with a tenth of jitter; granian
//     --workers-lifetime, its minimum of 60 s), and, on a schedule, SIGHUP
//     at 10 s and 30 s, SIGTTIN at 20 s, SIGTTOU at 25 s, SIGUSR2 at 45 s
//     (gunicorn: the old master sent SIGTERM at 50 s, as its
//     documentation says). A signal a server does not take is not sent,
//     and says so in its line.
//
// Every request is counted: failed ones by kind, in each phase, and the
// p99 of each phase. Under m0serve the changes phase also holds -streams
// SSE streams (--realtime) while a publisher sends 20 frames a second;
// each stream reconnects as EventSource does (Last-Event-ID, the server's
// retry: up to a second), and the frames each received are checked against
// those published: lost, doubled, and gaps the server reported.

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/m0serve/m0/bench/internal/procfs"
	"golang.org/x/sys/unix"
)

// opsPeer is one server of the ops suite.
type opsPeer struct {
	name    string
	signals map[time.Duration]syscall.Signal // the changes phase's schedule
	argv    func(cfg *config, py *python, port, recycle int) []string
}

const (
	opsWorkers  = 2
	opsConns    = 64
	opsBaseline = 20 * time.Second
	opsChanges  = 60 * time.Second
	opsFrameHz  = 20
)

func opsPeers(benchVenv string) []opsPeer {
	all := map[time.Duration]syscall.Signal{
		10 * time.Second: syscall.SIGHUP, 20 * time.Second: syscall.SIGTTIN, 25 * time.Second: syscall.SIGTTOU,
		30 * time.Second: syscall.SIGHUP, 45 * time.Second: syscall.SIGUSR2,
	}
	gunicorn := map[time.Duration]syscall.Signal{50 * time.Second: syscall.SIGTERM}
	for k, v := range all {
		gunicorn[k] = v
	}
	bin := func(name string) string { return filepath.Join(benchVenv, "bin", name) }
	return []opsPeer{
		{name: "m0serve", signals: all, argv: func(cfg *config, py *python, port, recycle int) []string {
			a := []string{cfg.m0serve, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--workers", strconv.Itoa(opsWorkers),
				"--app-dir", filepath.Join(cfg.root, "bench", "apps"), "--realtime", "--replay-frames", "4096"}
			if recycle > 0 {
				a = append(a, "--max-requests", strconv.Itoa(recycle), "--max-requests-jitter", strconv.Itoa(recycle/10))
			}
			return append(a, "ops_app:application")
		}},
		{name: "gunicorn", signals: gunicorn, argv: func(cfg *config, py *python, port, recycle int) []string {
			a := []string{bin("gunicorn"), "--bind", "127.0.0.1:" + strconv.Itoa(port), "--workers", strconv.Itoa(opsWorkers),
				"--chdir", filepath.Join(cfg.root, "bench", "apps"), "--worker-class", "gthread", "--threads", "4"}
			if recycle > 0 {
				a = append(a, "--max-requests", strconv.Itoa(recycle), "--max-requests-jitter", strconv.Itoa(recycle/10))
			}
			return append(a, "ops_app:application")
		}},
		{name: "granian", signals: map[time.Duration]syscall.Signal{10 * time.Second: syscall.SIGHUP, 30 * time.Second: syscall.SIGHUP},
			argv: func(cfg *config, py *python, port, recycle int) []string {
				a := []string{bin("granian"), "--interface", "wsgi", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
					"--workers", strconv.Itoa(opsWorkers), "--working-dir", filepath.Join(cfg.root, "bench", "apps"), "--no-ws"}
				if recycle > 0 {
					a = append(a, "--workers-lifetime", "60")
				}
				return append(a, "ops_app:application")
			}},
	}
}

// opsProc is a server of the ops suite, in a process group of its own.
type opsProc struct {
	cmd    *exec.Cmd
	port   int
	exited chan struct{}
}

func startOps(p opsPeer, cfg *config, py *python, recycle int) (*opsProc, error) {
	port, err := procfs.FreePort()
	if err != nil {
		return nil, err
	}
	argv := p.argv(cfg, py, port, recycle)
	log := filepath.Join(cfg.workdir, fmt.Sprintf("ops-%s-%d.log", p.name, port))
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = py.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &opsProc{cmd: cmd, port: port, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				time.Sleep(time.Second) // every worker up
				return s, nil
			}
		}
		select {
		case <-s.exited:
			b, _ := os.ReadFile(log)
			return nil, fmt.Errorf("%s exited before it served:\n%s", p.name, b)
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("%s did not serve within 60 s", p.name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *opsProc) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// kill ends the server's whole group: a successor a re-exec started is in
// it too.
func (s *opsProc) kill() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	time.Sleep(6 * time.Second)
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
}

// opsPhase is what one phase measured.
type opsPhase struct {
	requests, failed int64
	kinds            map[string]int64
	lat              []time.Duration
}

func (p *opsPhase) p99ms() float64 {
	slices.Sort(p.lat)
	return quantile(p.lat, 0.99)
}

// opsPaced runs the paced load for d at rate a second and returns its phase.
func opsPaced(addr string, rate int, d time.Duration) *opsPhase {
	ph := &opsPhase{kinds: map[string]int64{}}
	var mu sync.Mutex
	stop := make(chan struct{})
	start := time.Now().Add(100 * time.Millisecond)
	period := time.Second / time.Duration(rate)
	due := func(i int64) time.Time { return start.Add(time.Duration(i) * period) }
	req := get("/")
	l := startLoad(loadSpec{addr: addr, conns: opsConns, stop: stop, timeout: 10 * time.Second,
		req: func(i int64) []byte {
			if w := time.Until(due(i)); w > 0 {
				time.Sleep(w)
			}
			return req
		},
		check: want200([]byte("Hello, World!\n")),
		each: func(o outcome) {
			lat := o.start.Add(o.took).Sub(due(o.i))
			mu.Lock()
			ph.requests++
			if o.err != "" {
				ph.failed++
				ph.kinds[o.err]++
			} else {
				ph.lat = append(ph.lat, lat)
			}
			mu.Unlock()
		}})
	time.Sleep(time.Until(start.Add(d)))
	close(stop)
	l.wait()
	return ph
}

// capacity is the server's rate with opsConns connections as fast as
// they go, for 3 s.
func capacity(addr string) float64 {
	stop := make(chan struct{})
	l := startLoad(loadSpec{addr: addr, conns: opsConns, stop: stop, req: func(int64) []byte { return get("/") },
		check: want200([]byte("Hello, World!\n"))})
	time.Sleep(3 * time.Second)
	close(stop)
	l.wait()
	return float64(l.ok) / l.elapsed.Seconds()
}

// opsSuite runs the scenario for every server whose virtualenv has it.
func opsSuite(cfg *config, py *python) ([]string, error) {
	benchVenv := filepath.Join(cfg.root, "bench", ".venv")
	var out []string
	for _, p := range opsPeers(benchVenv) {
		if p.name != "m0serve" {
			if _, err := os.Stat(p.argv(cfg, py, 0, 0)[0]); err != nil {
				out = append(out, fmt.Sprintf("ops server=%s skipped: %v (make bench/.venv: bench/run --quick)", p.name, err))
				continue
			}
		}
		line, err := opsRun(cfg, py, p)
		if err != nil {
			return out, fmt.Errorf("%s: %w", p.name, err)
		}
		out = append(out, line)
		fmt.Fprintln(os.Stderr, line)
	}
	return out, nil
}

func opsRun(cfg *config, py *python, p opsPeer) (string, error) {
	plain, err := startOps(p, cfg, py, 0)
	if err != nil {
		return "", err
	}
	capRate := capacity(plain.addr())
	rate := max(int(capRate/2), 100)
	base := opsPaced(plain.addr(), rate, opsBaseline)
	plain.kill()

	recycle := max(rate/opsWorkers*2, 50)
	srv, err := startOps(p, cfg, py, recycle)
	if err != nil {
		return "", err
	}
	defer srv.kill()
	var sse *sseCheck
	if p.name == "m0serve" {
		sse = opsSSE(srv.addr(), cfg.streams)
	}
	began := time.Now()
	var sent []string
	signalled := make(chan struct{})
	go func() {
		defer close(signalled)
		at := slices.Sorted(func(yield func(time.Duration) bool) {
			for k := range p.signals {
				if !yield(k) {
					return
				}
			}
		})
		for _, t := range at {
			time.Sleep(time.Until(began.Add(t)))
			sig := p.signals[t]
			syscall.Kill(srv.cmd.Process.Pid, sig)
			sent = append(sent, fmt.Sprintf("%s@%ds", unix.SignalName(sig), int(t.Seconds())))
		}
	}()
	ch := opsPaced(srv.addr(), rate, opsChanges)
	<-signalled // the schedule ends within the phase
	line := fmt.Sprintf("ops server=%s capacity=%.0f rate=%d recycle=%d baseline_p99_ms=%.2f changes_p99_ms=%.2f "+
		"baseline_failed=%d/%d changes_failed=%d/%d",
		p.name, capRate, rate, recycle, base.p99ms(), ch.p99ms(), base.failed, base.requests, ch.failed, ch.requests)
	if len(ch.kinds) > 0 {
		line += " failures=" + errSummary(ch.kinds)
	}
	line += " signals=" + strings.Join(sent, ",")
	if sse != nil {
		line += " " + sse.finish(srv.addr())
	}
	return line, nil
}

// sseCheck holds streams and publishes to them.
type sseCheck struct {
	streams   []*sseStream
	published []string
	pubFailed atomic.Int64
	stop      chan struct{}
	wg        sync.WaitGroup
}

type sseStream struct {
	mu       sync.Mutex
	ids      []string
	gaps     int
	connects int
}

func opsSSE(addr string, n int) *sseCheck {
	c := &sseCheck{stop: make(chan struct{})}
	for range n {
		s := &sseStream{}
		c.streams = append(c.streams, s)
		c.wg.Add(1)
		go func() { defer c.wg.Done(); s.run(addr, c.stop) }()
	}
	time.Sleep(2 * time.Second) // held
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		tick := time.NewTicker(time.Second / opsFrameHz)
		defer tick.Stop()
		client := &http.Client{Timeout: 10 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
			r, err := client.Post("http://"+addr+"/publish?c=ops", "text/plain", strings.NewReader("frame "+strconv.Itoa(i)))
			if err != nil {
				c.pubFailed.Add(1)
				continue
			}
			b := make([]byte, 128)
			n, _ := r.Body.Read(b)
			r.Body.Close()
			if r.StatusCode != 200 {
				c.pubFailed.Add(1)
				continue
			}
			c.published = append(c.published, strings.TrimSpace(string(b[:n])))
		}
	}()
	return c
}

// run reads the stream, reconnecting as EventSource does.
func (s *sseStream) run(addr string, stop chan struct{}) {
	retry := 100 * time.Millisecond
	last := ""
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			req := "GET /events?c=ops HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
			if last != "" {
				req += "Last-Event-ID: " + last + "\r\n"
			}
			c.Write([]byte(req + "\r\n"))
			go func() { <-stop; c.Close() }()
			s.mu.Lock()
			s.connects++
			s.mu.Unlock()
			br := bufio.NewReader(c)
			var id, event string
			inBody := false
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					break
				}
				line = strings.TrimRight(line, "\r\n")
				if !inBody {
					inBody = line == ""
					continue
				}
				switch {
				case strings.HasPrefix(line, "id:"):
					id = strings.TrimSpace(line[3:])
				case strings.HasPrefix(line, "event:"):
					event = strings.TrimSpace(line[6:])
				case strings.HasPrefix(line, "retry:"):
					if ms, err := strconv.Atoi(strings.TrimSpace(line[6:])); err == nil {
						retry = min(time.Duration(ms)*time.Millisecond, time.Second)
					}
				case strings.HasPrefix(line, "data:"):
					s.mu.Lock()
					switch event {
					case "m0-gap":
						s.gaps++
					case "", "message":
						if id != "" {
							s.ids = append(s.ids, id)
						}
					}
					s.mu.Unlock()
				case line == "":
					if id != "" {
						last = id
					}
					id, event = "", ""
				}
			}
			c.Close()
		}
		select {
		case <-stop:
			return
		case <-time.After(retry):
		}
	}
}

// finish waits for every stream to have the last frame, stops them, and
// says what each received against what was published.
func (c *sseCheck) finish(addr string) string {
	time.Sleep(3 * time.Second) // the last reconnects replayed
	close(c.stop)
	c.wg.Wait()
	want := map[string]bool{}
	for _, id := range c.published {
		want[id] = true
	}
	var lost, doubled, gaps, connects int
	for _, s := range c.streams {
		seen := map[string]int{}
		for _, id := range s.ids {
			seen[id]++
		}
		for id := range want {
			if seen[id] == 0 {
				lost++
			}
		}
		for _, n := range seen {
			if n > 1 {
				doubled += n - 1
			}
		}
		gaps += s.gaps
		connects += s.connects
	}
	return fmt.Sprintf("sse_streams=%d frames=%d publish_failed=%d frames_lost=%d frames_doubled=%d gaps=%d reconnects=%d",
		len(c.streams), len(c.published), c.pubFailed.Load(), lost, doubled, gaps, connects-len(c.streams))
}
