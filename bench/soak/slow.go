package main

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// paced is a load of rate requests a second of req for d, on conns
// connections: below what the server can serve, so that its p99 is the
// time a request takes, not the time it queues.
func paced(addr string, rate, conns int, d time.Duration, path string, want []byte) *load {
	total := int64(rate) * int64(d/time.Second)
	interval := time.Second / time.Duration(rate)
	var start time.Time
	l := startLoad(loadSpec{addr: addr, conns: conns, total: total,
		req: func(i int64) []byte {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
			return get(path)
		},
		check: want200(want)})
	start = l.started
	return l.wait()
}

// slowConns holds connections of one slow kind.
type slowConns struct {
	kind   string
	mu     sync.Mutex
	conns  []net.Conn
	failed int // could not connect, or the first write failed
	closed atomic.Int64
}

// slowKinds: what each kind sends first; then headers and body go on a
// byte a second, and the reader sends nothing more and reads nothing. A
// WSGI reader that never reads asks for a 1 MiB body, which the view
// gathers (a streamed one holds a Python thread until the client leaves,
// docs/running.md); an ASGI one for a 1 GiB stream.
func slowKinds(protocol string) []struct{ kind, first, drip string } {
	never := "GET /big?n=1048576 HTTP/1.1\r\nHost: soak\r\n\r\n"
	if protocol == "asgi" {
		never = "GET /bytes?n=1073741824 HTTP/1.1\r\nHost: soak\r\n\r\n"
	}
	return []struct{ kind, first, drip string }{
		{"slowloris-headers", "GET /hello HTTP/1.1\r\nHost: soak\r\n", "X-Slow: 1\r\n"},
		{"slow-body", "POST /upload HTTP/1.1\r\nHost: soak\r\nContent-Length: 1000000\r\n\r\n", "b"},
		{"never-reads", never, ""},
	}
}

// open opens n connections of a kind at about 500 a second.
func openSlow(addr, kind, first string, n int) *slowConns {
	s := &slowConns{kind: kind}
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err == nil {
			if tc, ok := c.(*net.TCPConn); ok && kind == "never-reads" {
				tc.SetReadBuffer(4096) // a reader that never reads takes little
			}
			_, err = c.Write([]byte(first))
		}
		if err != nil {
			s.failed++
			continue
		}
		s.conns = append(s.conns, c)
		if i%50 == 49 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return s
}

// drip sends one byte of drip on every connection, spread over a second,
// until stop; a connection whose write fails is counted closed.
func (s *slowConns) drip(drip string, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	if drip == "" {
		return
	}
	alive := make([]bool, len(s.conns))
	for i := range alive {
		alive[i] = true
	}
	pos := make([]int, len(s.conns))
	for {
		start := time.Now()
		for i, c := range s.conns {
			if !alive[i] {
				continue
			}
			c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := c.Write([]byte{drip[pos[i]%len(drip)]}); err != nil {
				alive[i] = false
				s.closed.Add(1)
			}
			pos[i]++
			if i%100 == 99 {
				select {
				case <-stop:
					return
				case <-time.After(time.Second * 100 / time.Duration(len(s.conns)+1)):
				}
			}
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Until(start.Add(time.Second))):
		}
	}
}

// stillOpen counts the connections the server has not closed: a read
// that times out at once means open (never-readers may have response
// bytes waiting, which count as open too).
func (s *slowConns) stillOpen() int {
	n := 0
	buf := make([]byte, 1)
	for _, c := range s.conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, err := c.Read(buf)
		if err == nil || isTimeout(err) {
			n++
		}
	}
	return n
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func (s *slowConns) close() {
	for _, c := range s.conns {
		c.Close()
	}
}

// slowSuite: normal requests' p99 idle, then with cfg.slow connections of
// each slow kind held open.
func slowSuite(cfg *config, py *python) ([]string, error) {
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
		const rate, conns = 1000, 8
		paced(srv.addr(), rate, conns, 3*time.Second, "/hello", nil) // warm
		idleRSS := rssKiB(srv.pid())
		idle := paced(srv.addr(), rate, conns, cfg.slowFor, "/hello", []byte("Hello, World!\n"))
		var held []*slowConns
		stop := make(chan struct{})
		var wg sync.WaitGroup
		opened := time.Now()
		for _, k := range slowKinds(protocol) {
			if !slices.Contains(cfg.slowKinds, k.kind) {
				continue
			}
			s := openSlow(srv.addr(), k.kind, k.first, cfg.slow)
			held = append(held, s)
			wg.Add(1)
			go s.drip(k.drip, stop, &wg)
		}
		openTook := time.Since(opened)
		busy := paced(srv.addr(), rate, conns, cfg.slowFor, "/hello", []byte("Hello, World!\n"))
		heldRSS := rssKiB(srv.pid())
		close(stop)
		wg.Wait()
		line := fmt.Sprintf("slow protocol=%s python=%s rate=%d/s conns=%d window=%v idle: n=%d failed=%d p50=%.2fms p99=%.2fms "+
			"| held: n=%d failed=%d p50=%.2fms p99=%.2fms p99_ratio=%.2f | rss_idle=%.1fMiB rss_held=%.1fMiB opened_in=%.1fs",
			protocol, py.version, rate, conns, cfg.slowFor, idle.ok+sum(idle.errs), sum(idle.errs), quantile(idle.lat, 0.5), quantile(idle.lat, 0.99),
			busy.ok+sum(busy.errs), sum(busy.errs), quantile(busy.lat, 0.5), quantile(busy.lat, 0.99),
			quantile(busy.lat, 0.99)/quantile(idle.lat, 0.99), mib(idleRSS), mib(heldRSS), openTook.Seconds())
		for _, s := range held {
			line += fmt.Sprintf(" %s=%d(open_at_end=%d,connect_failed=%d)", s.kind, len(s.conns), s.stillOpen(), s.failed)
			s.close()
		}
		line += " errors=[" + errSummary(busy.errs) + "] cmd=" + strconv.Quote(srv.command())
		out = append(out, line)
		if _, err := srv.stop(); err != nil {
			return out, err
		}
	}
	return out, nil
}
