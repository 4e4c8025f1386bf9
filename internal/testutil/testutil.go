// Package testutil holds what the tests and benchmarks of several packages
// share and no package of the server needs.
package testutil

import (
	"bytes"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"
)

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
