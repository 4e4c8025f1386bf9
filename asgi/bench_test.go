package asgi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/valyala/fasthttp"
)

// discard is a ResponseWriter that keeps nothing, so a benchmark measures
// the bridge and not a server.
type discard struct {
	h      http.Header
	status int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(s int)           { d.status = s }

// BenchmarkServeHTTP is the net/http adapter's cost for a hello-world
// request, the round trip through the loop included, net/http's own
// excluded; one request at a time, so no batching helps it.
func BenchmarkServeHTTP(b *testing.B) {
	r := httptest.NewRequest("GET", "/hello", nil)
	r.RemoteAddr = "127.0.0.1:54321"
	r.Header.Set("User-Agent", "wrk")
	r.Header.Set("Accept", "*/*")
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		clear(w.h)
		handler.ServeHTTP(w, r)
		if w.status != 200 {
			b.Fatal(w.status)
		}
	}
}

// BenchmarkServeFastHTTP is the same through the fasthttp adapter.
func BenchmarkServeFastHTTP(b *testing.B) {
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
		handler.ServeFastHTTP(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatal(ctx.Response.StatusCode())
		}
	}
}
