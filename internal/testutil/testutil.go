// Package testutil holds what the tests and benchmarks of several packages
// share and no package of the server needs.
package testutil

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// FreePort is a TCP port on 127.0.0.1 nothing is bound to now, below the
// kernel's range of ephemeral ports where it can: a port the kernel hands
// out (what port 0 gives) can be handed again, to a client's connection
// (the load tool's, a readiness probe's), between the pick and the
// server's bind, and the server then fails to start.
func FreePort() (int, error) {
	lo, hi := belowEphemeral()
	if hi > lo {
		start := lo + rand.IntN(hi-lo)
		for i := range min(hi-lo, 200) {
			port := lo + (start-lo+i*7919)%(hi-lo) // strided, so a taken run of ports is left quickly
			if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				ln.Close()
				return port, nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// belowEphemeral is the span of ports FreePort picks from: from 10000 up
// to the first port of /proc/sys/net/ipv4/ip_local_port_range (32768 by
// default); empty where that range starts too low to leave one.
func belowEphemeral() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	first, err := strconv.Atoi(f[0])
	if err != nil || first < 12000 {
		return 0, 0
	}
	return 10000, first
}

// TCPPair returns both ends of a loopback TCP connection, closed when the
// test ends.
func TCPPair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// Discard is a ResponseWriter that keeps nothing but the status, so that a
// benchmark measures a handler and not a server. Reset it between
// requests.
type Discard struct {
	H      http.Header
	Status int
}

func (d *Discard) Header() http.Header         { return d.H }
func (d *Discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *Discard) WriteHeader(s int)           { d.Status = s }

// Reset empties the headers and the status.
func (d *Discard) Reset() {
	if d.H == nil {
		d.H = http.Header{}
	}
	clear(d.H)
	d.Status = 0
}

// HelloRequest is the request a hello-world benchmark sends, as wrk sends
// it: GET path with Host, User-Agent and Accept.
func HelloRequest(path string) *http.Request {
	r, _ := http.NewRequest("GET", "http://localhost:8000"+path, nil)
	r.RequestURI = path
	r.RemoteAddr = "127.0.0.1:54321"
	r.Header.Set("User-Agent", "wrk")
	r.Header.Set("Accept", "*/*")
	return r
}

// BenchServeHTTP serves the hello request with h b.N times, wanting 200.
func BenchServeHTTP(b *testing.B, h http.Handler) {
	r := HelloRequest("/hello")
	w := &Discard{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.Reset()
		h.ServeHTTP(w, r)
		if w.Status != 200 {
			b.Fatal(w.Status)
		}
	}
}

// BenchServeFastHTTP serves the hello request, as fasthttp parsed it, with
// serve b.N times, wanting 200.
func BenchServeFastHTTP(b *testing.B, serve fasthttp.RequestHandler) {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI("/hello")
	req.Header.SetHost("localhost:8000")
	req.Header.Set("User-Agent", "wrk")
	req.Header.Set("Accept", "*/*")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ctx.Init(&req, nil, nil)
		serve(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatal(ctx.Response.StatusCode())
		}
	}
}

// LockedBuffer collects output written from several goroutines (a test's
// log handler).
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Send writes req, as written, on a connection of its own to addr and
// reads the response. A server that has not answered within half a second
// is waiting for more (a body cut short): the connection's sending side is
// then closed, which ends the request. resp is nil when the server closed
// the connection without a response (a head it refused); err is no
// response within 5 seconds more, or a 200 cut short.
func Send(addr, req string) (resp *http.Response, body []byte, err error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	// The server may answer before it has read it all.
	go io.WriteString(c, req)
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := br.Peek(1); errors.Is(err, os.ErrDeadlineExceeded) {
		// Not half-closed at once: net/http takes that for a client
		// that left, and cancels the request.
		c.(*net.TCPConn).CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err = http.ReadResponse(br, nil)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, nil
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if errors.Is(err, os.ErrDeadlineExceeded) || err != nil && resp.StatusCode == http.StatusOK {
		return nil, nil, err
	}
	return resp, body, nil
}

// Quote quotes s for a failure message, cut to a length one can print.
func Quote(s string) string {
	if len(s) > 400 {
		return strconv.Quote(s[:400]) + "..."
	}
	return strconv.Quote(s)
}

// Latin1 is the bytes a native string carries, as a Go string (PEP 3333:
// each code point below 256 is one byte); a string with a code point
// above is returned marked, so that it equals no request's bytes.
func Latin1(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff || r == utf8.RuneError {
			return "\x00not latin-1\x00" + s
		}
		b = append(b, byte(r))
	}
	return string(b)
}

// PlainLines reports whether headers is header lines, each ended by CRLF
// and none empty, that a request head can go on after.
func PlainLines(headers string) bool {
	if headers == "" {
		return true
	}
	if !strings.HasSuffix(headers, "\r\n") {
		return false
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(headers, "\r\n"), "\r\n") {
		if line == "" || strings.ContainsAny(line, "\r\n") {
			return false
		}
	}
	return true
}

// IdleMem is what one idle keep-alive connection holds in the test's own
// process: goroutine stack and live heap, in bytes.
type IdleMem struct{ Stack, Heap float64 }

// IdleCost opens 128 keep-alive connections to the server at addr (in this
// process) for each path in turn, each with one GET answered (its body
// ends with end), and returns what each connection holds once they are
// idle: the client's side is in the figure too, and the same whatever the
// page. The connections of a path are closed before the next.
func IdleCost(t *testing.T, addr, end string, paths ...string) []IdleMem {
	t.Helper()
	one := func(path string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\nUser-Agent: test\r\nAccept: */*\r\n\r\n")
		got := make([]byte, 0, 8192)
		buf := make([]byte, 8192)
		for !strings.HasSuffix(string(got), end) {
			n, err := c.Read(buf)
			if err != nil {
				t.Fatalf("read: %v after %q", err, got)
			}
			got = append(got, buf[:n]...)
		}
		return c
	}
	mem := func() (uint64, uint64) {
		runtime.GC() // twice: what sync.Pools hold is freed, not counted
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.StackInuse, m.HeapAlloc
	}
	var out []IdleMem
	for _, path := range paths {
		for range 8 { // warm: pools, the thread's state
			one(path).Close()
		}
		time.Sleep(200 * time.Millisecond) // the connections closed before are gone
		stack0, heap0 := mem()
		const n = 128
		conns := make([]net.Conn, 0, n)
		for range n {
			conns = append(conns, one(path))
		}
		// The lower of two readings: a server goroutine that has not yet
		// finished its request's ending (fasthttp's resets) counts in the
		// first and not in the second.
		time.Sleep(100 * time.Millisecond)
		stack1, heap1 := mem()
		time.Sleep(100 * time.Millisecond)
		if s, h := mem(); h < heap1 {
			stack1, heap1 = s, h
		}
		for _, c := range conns {
			c.Close()
		}
		out = append(out, IdleMem{(float64(stack1) - float64(stack0)) / n, (float64(heap1) - float64(heap0)) / n})
	}
	return out
}

// KeepsNoBody fails t if an idle connection that was sent a 16 KiB page
// holds more than 4 KiB of heap beyond one that was sent a line: a page's
// body must not stay on its connection once sent (fasthttp keeps a buffer
// for a connection's next response, at the size of the largest body it
// held). page gives the path of a page of n bytes; its body ends with end.
func KeepsNoBody(t *testing.T, addr, end string, page func(n int) string) {
	t.Helper()
	got := IdleCost(t, addr, end, page(40), page(16384), page(40))
	small, large := max(got[0].Heap, got[2].Heap), got[1].Heap
	t.Logf("heap a connection: %.0f bytes after a line, %.0f after a 16 KiB page", small, large)
	if large-small > 4096 {
		t.Fatalf("an idle connection sent a 16 KiB page holds %.0f bytes of heap, one sent a line %.0f", large, small)
	}
}
