package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// soakResult is one soak run: n requests (or messages, or frames) and the
// server's RSS from the end of the warm-up to the end.
type soakResult struct {
	suite, python string
	n, failed     int64
	errs          map[string]int64
	elapsed       time.Duration
	p50, p99      float64 // ms
	warmKiB       int64
	endKiB        int64
	maxKiB        int64
	tenths        []int64 // RSS after each tenth of n, the end's last
	blocks        []int64 // Python's allocated blocks at the same points
	heap          []int64 // the Go heap in use (KiB) at the same points, under -metrics
	held          []int64 // what the Go runtime holds from the system (KiB), the same
	serverErrors  int     // ERROR and WARN records in the server's log
	exit          int
	command       string
	extra         string
}

func (r *soakResult) growth() float64 {
	if r.warmKiB == 0 {
		return 0
	}
	return 100 * float64(r.endKiB-r.warmKiB) / float64(r.warmKiB)
}

func (r *soakResult) line() string {
	return fmt.Sprintf("soak suite=%s python=%s n=%d failed=%d rate=%.0f/s p50=%.2fms p99=%.2fms "+
		"rss_warm=%.1fMiB rss_end=%.1fMiB rss_max=%.1fMiB growth=%+.2f%% rss_by_tenth=[%s] py_blocks_by_tenth=[%s]%s server_log_errors=%d exit=%d%s errors=[%s] cmd=%q",
		r.suite, r.python, r.n, r.failed, float64(r.n)/r.elapsed.Seconds(), r.p50, r.p99,
		mib(r.warmKiB), mib(r.endKiB), mib(r.maxKiB), r.growth(), tenthsText(r.tenths), blocksText(r.blocks), heapText(r.heap, r.held), r.serverErrors, r.exit, r.extra,
		errSummary(r.errs), r.command)
}

func tenthsText(kib []int64) string {
	var parts []string
	for _, k := range kib {
		parts = append(parts, fmt.Sprintf("%.1f", mib(k)))
	}
	return strings.Join(parts, " ")
}

func blocksText(n []int64) string {
	var parts []string
	for _, k := range n {
		parts = append(parts, strconv.FormatInt(k, 10))
	}
	return strings.Join(parts, " ")
}

func heapText(inuse, held []int64) string {
	if len(inuse) == 0 {
		return ""
	}
	return " go_heap_inuse_by_tenth=[" + tenthsText(inuse) + "] go_held_by_tenth=[" + tenthsText(held) + "]"
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// checkpoints samples the RSS, and the blocks Python has allocated, each
// time done passes another tenth of n; the first is the end of the
// warm-up, from which the maximum is taken.
func checkpoints(s *sampler, addr string, done *atomic.Int64, n int64, ended <-chan struct{}) <-chan [4][]int64 {
	out := make(chan [4][]int64, 1)
	go func() {
		var rss, blocks, heap, held []int64
		defer func() { out <- [4][]int64{rss, blocks, heap, held} }()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for tenth := int64(1); tenth < 10; tenth++ {
			for done.Load() < n*tenth/10 {
				select {
				case <-t.C:
				case <-ended:
					return
				}
			}
			if tenth == 1 {
				s.resetMax()
			}
			rss = append(rss, s.take())
			blocks = append(blocks, pyBlocks(addr))
			h, g := goHeap(addr)
			heap, held = append(heap, h), append(held, g)
		}
	}()
	return out
}

// goHeap is the server's Go heap in use, and all the memory the Go
// runtime holds from the system (go_memstats_sys_bytes less
// go_memstats_heap_released_bytes), in KiB, from its /__metrics
// (-metrics); -1 when unknown.
func goHeap(addr string) (inuse, held int64) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/__metrics")
	if err != nil {
		return -1, -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	v := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if f, err := strconv.ParseFloat(value, 64); ok && err == nil && strings.HasPrefix(name, "go_memstats_") {
			v[name] = int64(f) / 1024
		}
	}
	inuse, ok := v["go_memstats_heap_inuse_bytes"]
	if !ok {
		return -1, -1
	}
	return inuse, v["go_memstats_sys_bytes"] - v["go_memstats_heap_released_bytes"]
}

// pyBlocks is sys.getallocatedblocks() in the server, after a collection
// (the application's /memory), or -1.
func pyBlocks(addr string) int64 {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return -1
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	resp, body, err := exchange(c, bufio.NewReader(c), get("/memory"))
	if err != nil || resp.StatusCode != 200 {
		return -1
	}
	var m struct{ Blocks int64 }
	if json.Unmarshal(body, &m) != nil {
		return -1
	}
	return m.Blocks
}

// serverLogErrors counts the server's ERROR and WARN records.
func serverLogErrors(s *server) int {
	return len(s.lines(" ERROR ")) + len(s.lines(" WARN "))
}

// soak runs one soak suite on one Python.
func soak(cfg *config, suite string, py *python) (*soakResult, error) {
	spec := serverSpec{python: py, appDir: cfg.apps, spec: "reliability_app:application"}
	if cfg.metrics {
		spec.args = []string{"--metrics"}
	}
	switch suite {
	case "asgi", "ws":
		spec.spec = "reliability_app:asgi"
	case "sse":
		spec.args = append(spec.args, "--realtime", "--replay-frames", "4096")
	}
	srv, err := startServer(cfg.m0serve, cfg.workdir, spec)
	if err != nil {
		return nil, err
	}
	r := &soakResult{suite: suite, python: py.version, command: srv.command(), errs: map[string]int64{}}
	smp := sample(srv.pid())
	ended := make(chan struct{})
	var done *atomic.Int64
	var finish func()
	switch suite {
	case "wsgi", "asgi":
		l := startLoad(loadSpec{addr: srv.addr(), conns: cfg.conns, total: cfg.n, req: func(int64) []byte { return get("/hello") },
			check: want200([]byte("Hello, World!\n"))})
		done = &l.done
		finish = func() {
			l.wait()
			r.n, r.failed, r.errs, r.elapsed = l.next.Load(), sum(l.errs), l.errs, l.elapsed
			r.n = min(r.n, cfg.n)
			r.p50, r.p99 = quantile(l.lat, 0.5), quantile(l.lat, 0.99)
		}
	case "ws":
		w := startWS(srv.addr(), cfg.conns, cfg.n)
		done = &w.done
		finish = func() {
			w.wait()
			r.n, r.failed, r.errs, r.elapsed = cfg.n, sum(w.errs), w.errs, w.elapsed
			r.p50, r.p99 = quantile(w.lat, 0.5), quantile(w.lat, 0.99)
		}
	case "sse":
		s := startSSE(srv.addr(), cfg.streams, cfg.n/int64(cfg.streams), cfg.rate)
		done = &s.delivered
		finish = func() {
			s.wait()
			r.n, r.errs, r.elapsed = s.frames, s.errs, s.elapsed
			r.failed = sum(s.errs)
			r.p50, r.p99 = quantile(s.lat, 0.5), quantile(s.lat, 0.99)
			r.extra = fmt.Sprintf(" streams=%d publishes=%d reconnects=%d", cfg.streams, s.publishes, s.reconnects.Load())
		}
	default:
		return nil, fmt.Errorf("unknown soak suite %q", suite)
	}
	marks := checkpoints(smp, srv.addr(), done, cfg.n, ended)
	finish()
	close(ended)
	r.endKiB = smp.take()
	m := <-marks
	r.tenths = append(m[0], r.endKiB)
	r.blocks = append(m[1], pyBlocks(srv.addr()))
	if cfg.metrics {
		h, g := goHeap(srv.addr())
		r.heap, r.held = append(m[2], h), append(m[3], g)
	}
	r.warmKiB = r.tenths[0]
	r.maxKiB = smp.max()
	smp.stop()
	r.serverErrors = serverLogErrors(srv)
	r.exit, err = srv.stop()
	if err != nil {
		return r, err
	}
	return r, nil
}

// wsLoad is conns WebSockets each sending a message and reading its echo,
// total messages in all.
type wsLoad struct {
	done    atomic.Int64
	next    atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    map[string]int64
	lat     []time.Duration
	start   time.Time
	elapsed time.Duration
}

func startWS(addr string, conns int, total int64) *wsLoad {
	w := &wsLoad{errs: map[string]int64{}, start: time.Now()}
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	for range conns {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			var c *websocket.Conn
			lat := make([]time.Duration, 0, 1024)
			errs := map[string]int64{}
			defer func() {
				if c != nil {
					c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""), time.Now().Add(time.Second))
					c.Close()
				}
				w.mu.Lock()
				w.lat = append(w.lat, lat...)
				for k, v := range errs {
					w.errs[k] += v
				}
				w.mu.Unlock()
			}()
			fail := func(what string, err error) {
				errs[what+": "+errText(err)]++
				if c != nil {
					c.Close()
					c = nil
				}
			}
			for {
				i := w.next.Add(1) - 1
				if i >= total {
					return
				}
				t0 := time.Now()
				if c == nil {
					var err error
					if c, _, err = d.Dial("ws://"+addr+"/ws", nil); err != nil {
						c = nil
						fail("dial", err)
						w.done.Add(1)
						continue
					}
				}
				msg := "m" + strconv.FormatInt(i, 10)
				c.SetWriteDeadline(t0.Add(30 * time.Second))
				c.SetReadDeadline(t0.Add(30 * time.Second))
				if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
					fail("write", err)
				} else if typ, got, err := c.ReadMessage(); err != nil {
					fail("read", err)
				} else if typ != websocket.TextMessage || string(got) != msg {
					errs["wrong echo"]++
				} else {
					lat = append(lat, time.Since(t0))
				}
				w.done.Add(1)
			}
		}()
	}
	return w
}

func (w *wsLoad) wait() {
	w.wg.Wait()
	w.elapsed = time.Since(w.start)
	slices.Sort(w.lat)
}

// sseLoad holds streams SSE streams on one channel and publishes
// publishes frames to it at rate a second; each stream must receive each
// frame once, in id order.
type sseLoad struct {
	addr       string
	streams    int
	publishes  int64
	frames     int64 // streams * publishes
	delivered  atomic.Int64
	reconnects atomic.Int64
	wg         sync.WaitGroup
	mu         sync.Mutex
	errs       map[string]int64
	lat        []time.Duration
	start      time.Time
	elapsed    time.Duration
	stop       chan struct{}
	pub        *load
	sent       []atomic.Int64 // frame index -> UnixNano when published
}

func startSSE(addr string, streams int, publishes int64, rate int) *sseLoad {
	s := &sseLoad{addr: addr, streams: streams, publishes: publishes, frames: int64(streams) * publishes,
		errs: map[string]int64{}, stop: make(chan struct{}), sent: make([]atomic.Int64, publishes)}
	var ready sync.WaitGroup
	for range streams {
		s.wg.Add(1)
		ready.Add(1)
		go s.reader(&ready)
	}
	ready.Wait()
	s.start = time.Now()
	interval := time.Second / time.Duration(rate)
	s.pub = startLoad(loadSpec{addr: addr, conns: 4, total: publishes,
		req: func(i int64) []byte {
			if d := time.Until(s.start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
			s.sent[i].Store(time.Now().UnixNano())
			body := strconv.FormatInt(i, 10)
			return []byte("POST /publish?c=soak HTTP/1.1\r\nHost: soak\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
		},
		check: func(_ int64, r *http.Response, b []byte) string {
			if r.StatusCode != 200 || !bytes.Contains(b, []byte("-")) {
				return fmt.Sprintf("publish: status %d %q", r.StatusCode, b)
			}
			return ""
		}})
	return s
}

func (s *sseLoad) wait() {
	s.pub.wait()
	for k, v := range s.pub.errs {
		s.errs[k] += v
	}
	// Every frame published reaches every stream within a few seconds.
	deadline := time.Now().Add(20 * time.Second)
	for s.delivered.Load() < s.frames && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s.elapsed = time.Since(s.start)
	close(s.stop)
	s.wg.Wait()
	if lost := s.frames - s.delivered.Load(); lost > 0 {
		s.errs["frames not received"] += lost
	}
	slices.Sort(s.lat)
}

// reader holds one stream, and reconnects with Last-Event-ID when it ends.
func (s *sseLoad) reader(ready *sync.WaitGroup) {
	defer s.wg.Done()
	seen := make([]bool, s.publishes)
	var last string
	var lat []time.Duration
	errs := map[string]int64{}
	defer func() {
		s.mu.Lock()
		s.lat = append(s.lat, lat...)
		for k, v := range errs {
			s.errs[k] += v
		}
		s.mu.Unlock()
	}()
	first := true
	for {
		c, err := net.DialTimeout("tcp", s.addr, 10*time.Second)
		if err != nil {
			errs["stream connect: "+errText(err)]++
			if first {
				ready.Done()
				return
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go func() { <-s.stop; c.Close() }()
		req := "GET /events?c=soak HTTP/1.1\r\nHost: soak\r\nAccept: text/event-stream\r\n"
		if last != "" {
			req += "Last-Event-ID: " + last + "\r\n"
		}
		c.Write([]byte(req + "\r\n"))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if first {
			ready.Done()
			first = false
		}
		if err != nil || resp.StatusCode != 200 {
			errs["stream refused"]++
			c.Close()
			time.Sleep(100 * time.Millisecond)
			continue
		}
		br := bufio.NewReader(resp.Body)
		var id, event, data string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				break
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if event == "m0-gap" {
					errs["m0-gap"]++
				}
				if data != "" && event == "" {
					n, err := strconv.ParseInt(data, 10, 64)
					switch {
					case err != nil || n < 0 || n >= s.publishes:
						errs["frame with unknown data"]++
					case seen[n]:
						errs["frame twice"]++
					default:
						seen[n] = true
						s.delivered.Add(1)
						lat = append(lat, time.Duration(time.Now().UnixNano()-s.sent[n].Load()))
					}
				}
				if id != "" {
					last = id
				}
				id, event, data = "", "", ""
			case strings.HasPrefix(line, "id:"):
				id = strings.TrimSpace(line[3:])
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(line[6:])
			case strings.HasPrefix(line, "data:"):
				data = strings.TrimSpace(line[5:])
			}
		}
		c.Close()
		select {
		case <-s.stop:
			return
		default:
		}
		s.reconnects.Add(1)
	}
}
