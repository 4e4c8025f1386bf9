package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// fdSuite: m0serve under RLIMIT_NOFILE cfg.nofile, one worker and two
// (cfg.fdWorkers),
// its descriptors exhausted by idle connections: what it logs and the CPU
// it spends while exhausted, whether it serves a connection it holds
// meanwhile, and how soon a new connection is served once they close.
func fdSuite(cfg *config, py *python) ([]string, error) {
	var out []string
	for _, workers := range cfg.fdWorkers {
		spec := serverSpec{python: py, appDir: cfg.apps, spec: "reliability_app:application", nofile: cfg.nofile}
		if workers > 1 {
			spec.args, spec.banners = []string{"--workers", "2"}, 2
		}
		srv, err := startServer(cfg.m0serve, cfg.workdir, spec)
		if err != nil {
			return out, err
		}
		line, err := exhaust(cfg, srv, workers)
		out = append(out, fmt.Sprintf("fds python=%s workers=%d nofile=%d %s cmd=%q", py.version, workers, cfg.nofile, line, srv.command()))
		code, serr := srv.stop()
		out[len(out)-1] += fmt.Sprintf(" exit=%d", code)
		if err != nil {
			return out, err
		}
		if serr != nil {
			return out, serr
		}
	}
	return out, nil
}

const retryLine = "cannot accept a connection; retrying"

func exhaust(cfg *config, srv *server, workers int) (string, error) {
	if err := hello(srv.addr(), 5*time.Second); err != nil {
		return "", fmt.Errorf("before: %v", err)
	}
	// A kept-alive connection, served before the exhaustion.
	kept, err := net.Dial("tcp", srv.addr())
	if err != nil {
		return "", err
	}
	defer kept.Close()
	kr := bufio.NewReader(kept)
	if err := helloOn(kept, kr); err != nil {
		return "", err
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	n := cfg.nofile*workers + 200
	for range n {
		c, err := net.DialTimeout("tcp", srv.addr(), 5*time.Second)
		if err != nil {
			break
		}
		held = append(held, c)
	}
	opened := len(held)
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.lines(retryLine)) == 0 {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no %q line after %d connections:\n%s", retryLine, len(held), srv.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Exhausted: a window of cpu and log lines.
	const window = 10 * time.Second
	linesBefore, ticksBefore := len(srv.lines(retryLine)), cpuTicks(srv.pid())
	time.Sleep(window)
	lines, ticks := len(srv.lines(retryLine))-linesBefore, cpuTicks(srv.pid())-ticksBefore
	servedWhile := "ok"
	if err := helloOn(kept, kr); err != nil {
		servedWhile = "failed: " + err.Error()
	}
	alive := "yes"
	select {
	case <-srv.exited:
		alive = "no"
	default:
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	t0 := time.Now()
	recovered := "no"
	for time.Since(t0) < 30*time.Second {
		if hello(srv.addr(), 5*time.Second) == nil {
			recovered = fmt.Sprintf("%.0fms", float64(time.Since(t0))/float64(time.Millisecond))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var failures int
	for _, l := range srv.lines(retryLine) {
		var f int
		if i := strings.Index(l, "failures="); i >= 0 {
			fmt.Sscanf(l[i:], "failures=%d", &f)
		}
		failures += f
	}
	return fmt.Sprintf("connections=%d alive_while_exhausted=%s kept_alive_conn_served_while_exhausted=%s "+
		"retry_lines_in_%v=%d failed_accepts_total=%d retry_lines_total=%d server_cpu_while_exhausted=%.1f%% new_conn_served_after_close_in=%s",
		opened, alive, servedWhile, window, lines, failures, len(srv.lines(retryLine)),
		100*float64(ticks)/100/window.Seconds(), recovered), nil
}

// hello sends GET /hello on a new connection.
func hello(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	return helloOn(c, bufio.NewReader(c))
}

func helloOn(c net.Conn, br *bufio.Reader) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	resp, body, err := exchange(c, br, get("/hello"))
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || string(body) != "Hello, World!\n" {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// hugeSuite: a 1 GiB streamed response, WSGI and ASGI, to a reader that
// reads it whole, one that reads 64 KiB every 100 ms and one that never
// reads, one at a time: the server's RSS above its idle RSS meanwhile.
func hugeSuite(cfg *config, py *python) ([]string, error) {
	var out []string
	for _, protocol := range []string{"wsgi", "asgi"} {
		spec := serverSpec{python: py, appDir: cfg.apps, spec: "reliability_app:application"}
		if protocol == "asgi" {
			spec.spec = "reliability_app:asgi"
		}
		srv, err := startServer(cfg.m0serve, cfg.workdir, spec)
		if err != nil {
			return out, err
		}
		hello(srv.addr(), 5*time.Second)
		idle := rssKiB(srv.pid())
		line := fmt.Sprintf("huge protocol=%s python=%s body=1GiB rss_idle=%.1fMiB", protocol, py.version, mib(idle))
		for _, reader := range []string{"reads-all", "reads-64KiB-per-100ms", "never-reads"} {
			smp := sample(srv.pid())
			got, took, err := readHuge(srv.addr(), reader, 20*time.Second)
			peak := smp.max()
			smp.stop()
			peak = max(peak, rssKiB(srv.pid()))
			if err != nil {
				line += fmt.Sprintf(" %s=[error %v]", reader, err)
				continue
			}
			line += fmt.Sprintf(" %s=[read %.1fMiB in %.1fs, rss_peak=%.1fMiB (+%.1fMiB)]", reader, float64(got)/(1<<20),
				took.Seconds(), mib(peak), mib(peak-idle))
		}
		if err := hello(srv.addr(), 10*time.Second); err != nil {
			line += " served_after=[" + err.Error() + "]"
		} else {
			line += " served_after=ok"
		}
		out = append(out, line+fmt.Sprintf(" cmd=%q", srv.command()))
		if _, err := srv.stop(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// readHuge reads GET /bytes?n=1GiB as reader says, for at most d (the
// whole body for reads-all), and returns what it read.
func readHuge(addr, reader string, d time.Duration) (int64, time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	if reader == "never-reads" {
		c.(*net.TCPConn).SetReadBuffer(4096)
	}
	start := time.Now()
	if _, err := c.Write(get("/bytes?n=1073741824&id=huge")); err != nil {
		return 0, 0, err
	}
	switch reader {
	case "never-reads":
		time.Sleep(d)
		return 0, time.Since(start), nil
	case "reads-all":
		c.SetDeadline(start.Add(5 * time.Minute))
		resp, err := http.ReadResponse(bufio.NewReaderSize(c, 1<<20), nil)
		if err != nil {
			return 0, 0, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && n != 1<<30 {
			err = fmt.Errorf("%d bytes, want %d", n, 1<<30)
		}
		return n, time.Since(start), err
	}
	var n int64
	buf := make([]byte, 64<<10)
	for time.Since(start) < d {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, err := io.ReadFull(c, buf)
		n += int64(k)
		if err != nil {
			return n, time.Since(start), err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return n, time.Since(start), nil
}
