package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadSpec is a closed-loop HTTP/1.1 load: conns keep-alive connections,
// each sending its next request when the last one's response is read.
// Nothing is retried: every failure is counted once, by kind.
type loadSpec struct {
	addr  string
	conns int
	total int64         // requests in all; 0: until stop
	stop  chan struct{} // ends the load (nil: only total does)
	// req is request i's bytes; check says what is wrong with its answer
	// ("" nothing).
	req   func(i int64) []byte
	check func(i int64, resp *http.Response, body []byte) string
	// timeout bounds each request, dial to last byte; 0 is 30 s.
	timeout time.Duration
	// each, when set, is told every request's outcome.
	each func(o outcome)
	// backoff is how long a connection waits after a failure before its
	// next request, as a client backs off (0: not at all).
	backoff time.Duration
}

// outcome is one request's fate.
type outcome struct {
	i       int64
	conn    int64 // serial of the connection it went on
	reused  bool  // the connection had answered a request before
	start   time.Time
	took    time.Duration
	status  int
	header  http.Header
	err     string // "" when answered as it should be
	partial bool   // some of the answer arrived before the failure
}

// load is a load running, then its result.
type load struct {
	spec    loadSpec
	done    atomic.Int64 // requests finished, failed or not
	next    atomic.Int64
	serial  atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    map[string]int64
	lat     []time.Duration
	ok      int64
	started time.Time
	elapsed time.Duration
}

func startLoad(s loadSpec) *load {
	if s.timeout == 0 {
		s.timeout = 30 * time.Second
	}
	l := &load{spec: s, errs: map[string]int64{}, started: time.Now()}
	for range s.conns {
		l.wg.Add(1)
		go l.worker()
	}
	return l
}

// wait waits for the load to end and returns its result.
func (l *load) wait() *load {
	l.wg.Wait()
	l.elapsed = time.Since(l.started)
	slices.Sort(l.lat)
	return l
}

func (l *load) stopped() bool {
	if l.spec.stop == nil {
		return false
	}
	select {
	case <-l.spec.stop:
		return true
	default:
		return false
	}
}

// counter counts the bytes read from a connection.
type counter struct {
	net.Conn
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n += int64(n)
	return n, err
}

func (l *load) worker() {
	defer l.wg.Done()
	var (
		c      *counter
		br     *bufio.Reader
		serial int64
		served int
	)
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	lat := make([]time.Duration, 0, 1024)
	errs := map[string]int64{}
	var ok int64
	defer func() {
		l.mu.Lock()
		l.lat = append(l.lat, lat...)
		for k, v := range errs {
			l.errs[k] += v
		}
		l.ok += ok
		l.mu.Unlock()
	}()
	for !l.stopped() {
		i := l.next.Add(1) - 1
		if l.spec.total > 0 && i >= l.spec.total {
			return
		}
		req := l.spec.req(i) // it may wait for the request's time
		o := outcome{i: i, start: time.Now()}
		deadline := o.start.Add(l.spec.timeout)
		if c == nil {
			nc, err := net.DialTimeout("tcp", l.spec.addr, l.spec.timeout)
			if err != nil {
				o.err = "connect: " + errText(err)
				l.finish(&o, &lat, errs, &ok)
				time.Sleep(l.spec.backoff)
				continue
			}
			c = &counter{Conn: nc}
			br = bufio.NewReaderSize(c, 64<<10)
			serial = l.serial.Add(1)
			served = 0
		}
		o.conn, o.reused = serial, served > 0
		c.SetDeadline(deadline)
		before := c.n
		resp, body, err := exchange(c, br, req)
		if err == nil {
			o.status, o.header = resp.StatusCode, resp.Header
			o.err = l.spec.check(i, resp, body)
		} else {
			o.err = err.Error()
			o.partial = c.n > before
		}
		if err != nil || resp.Close {
			c.Close()
			c = nil
		} else {
			served++
		}
		l.finish(&o, &lat, errs, &ok)
		if o.err != "" && l.spec.backoff > 0 {
			time.Sleep(l.spec.backoff)
		}
	}
}

func (l *load) finish(o *outcome, lat *[]time.Duration, errs map[string]int64, ok *int64) {
	o.took = time.Since(o.start)
	if o.err == "" {
		*ok++
		*lat = append(*lat, o.took)
	} else {
		errs[o.err]++
	}
	if l.spec.each != nil {
		l.spec.each(*o)
	}
	l.done.Add(1)
}

// exchange writes one request and reads its response, whole.
func exchange(c net.Conn, br *bufio.Reader, req []byte) (*http.Response, []byte, error) {
	if _, err := c.Write(req); err != nil {
		return nil, nil, fmt.Errorf("write: %s", errText(err))
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("read head: %s", errText(err))
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return resp, nil, fmt.Errorf("read body: %s", errText(err))
	}
	return resp, body, nil
}

// errText is an error's kind, without the addresses that would make each
// one unique.
func errText(err error) string {
	s := err.Error()
	for _, k := range []string{"connection refused", "connection reset by peer", "broken pipe", "i/o timeout",
		"unexpected EOF", "EOF", "too many open files", "cannot assign requested address"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	return s
}

// get is a GET request for path.
func get(path string) []byte {
	return []byte("GET " + path + " HTTP/1.1\r\nHost: soak\r\n\r\n")
}

// want200 checks for a 200 with exactly body (nil: any body).
func want200(body []byte) func(int64, *http.Response, []byte) string {
	return func(_ int64, r *http.Response, b []byte) string {
		if r.StatusCode != 200 {
			return fmt.Sprintf("status %d", r.StatusCode)
		}
		if body != nil && string(b) != string(body) {
			return "wrong body"
		}
		return ""
	}
}

// quantile of sorted durations, in milliseconds.
func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

// errSummary is the failures by kind, most first: "3 EOF, 1 status 500".
func errSummary(errs map[string]int64) string {
	if len(errs) == 0 {
		return "none"
	}
	type kv struct {
		k string
		v int64
	}
	var out []kv
	for k, v := range errs {
		out = append(out, kv{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].v > out[j].v || out[i].v == out[j].v && out[i].k < out[j].k })
	var parts []string
	for _, e := range out {
		parts = append(parts, fmt.Sprintf("%d %s", e.v, e.k))
	}
	return strings.Join(parts, ", ")
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
