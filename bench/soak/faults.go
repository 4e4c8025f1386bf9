package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// faultResult is one fault under load: every request sent, and each
// failure either explained by the fault (by rule, named in the line) or
// not.
type faultResult struct {
	scenario, python string
	sent, ok         int64
	explained        map[string]int64
	unexplained      map[string]int64
	detail           []string // the first unexplained failures, in full
	extra            string
	command          string
}

func (r *faultResult) line() string {
	for _, d := range r.detail {
		fmt.Fprintf(os.Stderr, "soak: %s: unexplained: %s\n", r.scenario, d)
	}
	return fmt.Sprintf("faults scenario=%s python=%s sent=%d ok=%d failed=%d explained=%d unexplained=%d%s "+
		"explained_by_fault=[%s] unexplained=[%s] cmd=%q",
		r.scenario, r.python, r.sent, r.ok, sum(r.explained)+sum(r.unexplained), sum(r.explained),
		sum(r.unexplained), r.extra, errSummary(r.explained), errSummary(r.unexplained), r.command)
}

// tally sorts outcomes into explained and unexplained failures by a rule:
// explain returns why the fault explains a failure, or "".
type tally struct {
	mu  sync.Mutex
	res *faultResult
}

func newTally(scenario, python, command string) *tally {
	return &tally{res: &faultResult{scenario: scenario, python: python, command: command,
		explained: map[string]int64{}, unexplained: map[string]int64{}}}
}

func (t *tally) add(o outcome, explain func(o outcome) string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.res.sent++
	if o.err == "" {
		t.res.ok++
		return
	}
	if why := explain(o); why != "" {
		t.res.explained[why+": "+o.err]++
		return
	}
	t.res.unexplained[o.err]++
	if len(t.res.detail) < 5 {
		t.res.detail = append(t.res.detail, fmt.Sprintf("request %d at %s on connection %d (reused %v, partial answer %v, status %d): %s",
			o.i, o.start.Format("15:04:05.000000"), o.conn, o.reused, o.partial, o.status, o.err))
	}
}

func faultSuite(cfg *config, py *python) ([]string, error) {
	var out []string
	for _, f := range []func(*config, *python) (*faultResult, error){
		func(c *config, p *python) (*faultResult, error) { return raiseTenth(c, p, "wsgi") },
		func(c *config, p *python) (*faultResult, error) { return raiseTenth(c, p, "asgi") },
		killWorker,
		func(c *config, p *python) (*faultResult, error) { return sigterm(c, p, false) },
		func(c *config, p *python) (*faultResult, error) { return sigterm(c, p, true) },
		func(c *config, p *python) (*faultResult, error) { return leave(c, p, "wsgi") },
		func(c *config, p *python) (*faultResult, error) { return leave(c, p, "asgi") },
	} {
		r, err := f(cfg, py)
		if r != nil {
			out = append(out, r.line())
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// raiseTenth: 20,000 GET /tenth, of which the application raises on every
// tenth; the 500s it answers them are the fault's, and one log record
// each.
func raiseTenth(cfg *config, py *python, protocol string) (*faultResult, error) {
	spec := serverSpec{python: py, appDir: cfg.apps, spec: "reliability_app:application"}
	if protocol == "asgi" {
		spec.spec = "reliability_app:asgi"
	}
	srv, err := startServer(cfg.m0serve, cfg.workdir, spec)
	if err != nil {
		return nil, err
	}
	t := newTally("raise-every-tenth-"+protocol, py.version, srv.command())
	const n = 20000
	startLoad(loadSpec{addr: srv.addr(), conns: 16, total: n, req: func(int64) []byte { return get("/tenth") },
		check: want200(nil),
		each: func(o outcome) {
			t.add(o, func(o outcome) string {
				if o.err == "status 500" {
					return "the application raised"
				}
				return ""
			})
		}}).wait()
	time.Sleep(200 * time.Millisecond) // the last records reach the log
	logged := len(srv.lines("application error"))
	t.res.extra = fmt.Sprintf(" want_500=%d logged_errors=%d", n/10, logged)
	if _, err := srv.stop(); err != nil {
		return t.res, err
	}
	return t.res, nil
}

var armedRE = regexp.MustCompile(`(?m)^\[worker (\d+)\] pid=(\d+) armed`)

// killWorker: --workers 2, load on keep-alive connections, kill -9 of
// worker 1. A failure is the fault's when its connection was served by
// the killed worker (one in-flight request per such connection) or never
// answered (accepted by the killed worker and not yet served).
func killWorker(cfg *config, py *python) (*faultResult, error) {
	srv, err := startServer(cfg.m0serve, cfg.workdir, serverSpec{python: py, appDir: cfg.apps,
		spec: "reliability_app:application", args: []string{"--workers", "2"}, banners: 2})
	if err != nil {
		return nil, err
	}
	b, _ := os.ReadFile(srv.stdout)
	m := armedRE.FindAllStringSubmatch(string(b), -1)
	var victim int
	for _, x := range m {
		if x[1] == "1" {
			victim, _ = strconv.Atoi(x[2])
		}
	}
	t := newTally("kill-9-worker", py.version, srv.command())
	var mu sync.Mutex
	owner := map[int64]int{} // connection serial -> pid that answered on it
	failedOn := map[int64]int{}
	var killed atomic.Bool
	stop := make(chan struct{})
	l := startLoad(loadSpec{addr: srv.addr(), conns: 16, stop: stop, req: func(int64) []byte { return get("/pid") },
		check: want200(nil),
		each: func(o outcome) {
			mu.Lock()
			defer mu.Unlock()
			if o.err == "" {
				pid, _ := strconv.Atoi(o.header.Get("X-Pid"))
				owner[o.conn] = pid
			}
			t.add(o, func(o outcome) string {
				if !killed.Load() {
					return ""
				}
				failedOn[o.conn]++
				if failedOn[o.conn] > 1 {
					return "" // one request in flight per connection
				}
				switch owner[o.conn] {
				case victim:
					return "on a connection of the killed worker"
				case 0:
					return "on a new connection, not yet answered"
				}
				return ""
			})
		}})
	time.Sleep(2 * time.Second)
	killed.Store(true)
	syscall.Kill(victim, syscall.SIGKILL)
	time.Sleep(3 * time.Second)
	close(stop)
	l.wait()
	replaced := len(srv.lines("signal: killed; replacing it"))
	t.res.extra = fmt.Sprintf(" victim_pid=%d replaced=%d", victim, replaced)
	if _, err := srv.stop(); err != nil {
		return t.res, err
	}
	return t.res, nil
}

// sigterm: load (GET /sleep?s=0.05 on 16 connections), then SIGTERM.
// A request that began before the signal must succeed; one after it may
// fail with no byte of an answer (the listener closed, or a kept-alive
// connection closed by the drain as it was sent). With stuck, one more
// request sleeps 30 s, past the 5-second drain bound: its failure is the
// fault's too.
func sigterm(cfg *config, py *python, stuck bool) (*faultResult, error) {
	srv, err := startServer(cfg.m0serve, cfg.workdir, serverSpec{python: py, appDir: cfg.apps,
		spec: "reliability_app:application", args: []string{"--blocking-threads", "4"}})
	if err != nil {
		return nil, err
	}
	name := "sigterm"
	if stuck {
		name = "sigterm-view-past-drain-bound"
	}
	t := newTally(name, py.version, srv.command())
	var signalled atomic.Int64 // UnixNano
	defer func() {
		if at := signalled.Load(); at != 0 {
			fmt.Fprintf(os.Stderr, "soak: %s: SIGTERM at %s\n", name, time.Unix(0, at).Format("15:04:05.000000"))
		}
	}()
	explain := func(o outcome) string {
		at := signalled.Load()
		switch {
		case at == 0 || o.start.UnixNano() < at:
			return ""
		case o.partial || o.status != 0:
			return "" // an answer began: it must be whole
		}
		return "sent after SIGTERM, no answer"
	}
	exited := make(chan struct{})
	l := startLoad(loadSpec{addr: srv.addr(), conns: 16, stop: exited, req: func(int64) []byte { return get("/sleep?s=0.05") },
		check: want200([]byte("slept\n")), timeout: 20 * time.Second, backoff: 50 * time.Millisecond,
		each: func(o outcome) { t.add(o, explain) }})
	var stuckErr error
	stuckDone := make(chan struct{})
	if stuck {
		go func() {
			defer close(stuckDone)
			c, err := net.Dial("tcp", srv.addr())
			if err != nil {
				stuckErr = err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(40 * time.Second))
			c.Write(get("/sleep?s=30"))
			b, _ := io.ReadAll(c)
			if !strings.HasPrefix(string(b), "HTTP/1.1 200") {
				stuckErr = fmt.Errorf("no answer (%d bytes)", len(b))
			}
		}()
	} else {
		close(stuckDone)
	}
	time.Sleep(2 * time.Second)
	signalled.Store(time.Now().UnixNano())
	t0 := time.Now()
	code, werr := srv.stop()
	took := time.Since(t0)
	time.Sleep(500 * time.Millisecond)
	close(exited)
	l.wait()
	<-stuckDone
	if stuck {
		t.res.sent++
		if stuckErr != nil {
			t.res.explained["the view past the drain bound: "+stuckErr.Error()]++
		} else {
			t.res.ok++
		}
	}
	named := len(srv.lines("still running a request"))
	t.res.extra = fmt.Sprintf(" exit=%d exit_after=%.2fs named_still_running=%d", code, took.Seconds(), named)
	return t.res, werr
}

// leave: load on 8 connections while 200 clients leave mid upload (half
// of a 1 MiB body sent) and 200 mid download (1 MiB of a 100 MiB stream
// read). No request of the load may fail; every stream left is closed
// (its close() or finally runs).
func leave(cfg *config, py *python, protocol string) (*faultResult, error) {
	spec := serverSpec{python: py, appDir: cfg.apps, spec: "reliability_app:application"}
	if protocol == "asgi" {
		spec.spec = "reliability_app:asgi"
	}
	srv, err := startServer(cfg.m0serve, cfg.workdir, spec)
	if err != nil {
		return nil, err
	}
	t := newTally("disconnect-mid-upload-and-download-"+protocol, py.version, srv.command())
	stop := make(chan struct{})
	l := startLoad(loadSpec{addr: srv.addr(), conns: 8, stop: stop, req: func(int64) []byte { return get("/hello") },
		check: want200([]byte("Hello, World!\n")), each: func(o outcome) { t.add(o, func(outcome) string { return "" }) }})
	const k = 200
	var wg sync.WaitGroup
	var upFailed, downFailed atomic.Int64
	for i := range k {
		wg.Add(2)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", srv.addr())
			if err != nil {
				upFailed.Add(1)
				return
			}
			c.Write([]byte("POST /upload HTTP/1.1\r\nHost: soak\r\nContent-Length: 1048576\r\n\r\n"))
			c.Write(make([]byte, 512<<10))
			if i%2 == 0 {
				c.(*net.TCPConn).SetLinger(0) // a reset, not a FIN
			}
			c.Close()
		}()
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", srv.addr())
			if err != nil {
				downFailed.Add(1)
				return
			}
			c.SetDeadline(time.Now().Add(20 * time.Second))
			c.Write(get("/bytes?n=104857600&id=left"))
			if _, err := io.CopyN(io.Discard, c, 1<<20); err != nil {
				downFailed.Add(1)
			}
			if i%2 == 0 {
				c.(*net.TCPConn).SetLinger(0)
			}
			c.Close()
		}()
		if i%20 == 19 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	wg.Wait()
	// Every stream left is closed within a few seconds.
	closed := 0
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		closed = closedCount(srv.addr(), "left")
		if closed >= k {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	l.wait()
	t.res.extra = fmt.Sprintf(" left_mid_upload=%d left_mid_download=%d downloads_closed=%d client_side_failures=%d server_log_errors=%d",
		k, k, closed, upFailed.Load()+downFailed.Load(), serverLogErrors(srv))
	if _, err := srv.stop(); err != nil {
		return t.res, err
	}
	return t.res, nil
}

// closedCount is how many streams of id the application saw closed.
func closedCount(addr, id string) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/counts")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`"` + id + `": (\d+)`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
