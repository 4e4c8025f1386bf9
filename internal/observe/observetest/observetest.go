// Package observetest holds what the tests of the middleware share: a Go
// application that answers both front ends, and readers of what the
// middleware writes.
package observetest

import (
	"context"
	"encoding/json"
	"github.com/m0serve/m0/internal/wire"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/front"
	"github.com/valyala/fasthttp"
)

// Double is a Go application standing in for the WSGI handler: it answers
// both front ends, with buffered and streamed bodies.
//
//	/buf     "hello, world" (12 bytes)
//	/stream  three parts of 5 bytes, of unknown length, counted (SentCounter)
//	/plain   the same stream without SentCounter
//	/sized   the same stream with its length given
//	/empty   204
//
// calls counts the requests that reached it.
type Double struct{ Calls chan string }

// NewDouble returns a Double.
func NewDouble() *Double { return &Double{Calls: make(chan string, 100)} }

const (
	BufBody    = "hello, world"
	StreamPart = "part."
	StreamN    = 3
)

func (d *Double) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.Calls <- r.URL.Path
	switch r.URL.Path {
	case "/stream", "/plain", "/sized":
		if r.URL.Path == "/sized" {
			w.Header().Set("Content-Length", "15")
		}
		for range StreamN {
			io.WriteString(w, StreamPart)
			http.NewResponseController(w).Flush()
		}
	case "/empty":
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, BufBody)
	}
}

func (d *Double) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	d.Calls <- wire.Path(ctx)
	switch wire.Path(ctx) {
	case "/stream":
		ctx.SetBodyStream(&Parts{n: StreamN}, -1)
	case "/plain":
		ctx.SetBodyStream(struct{ io.Reader }{&Parts{n: StreamN}}, -1)
	case "/sized":
		ctx.SetBodyStream(&Parts{n: StreamN}, StreamN*len(StreamPart))
	case "/empty":
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	default:
		ctx.SetContentType("text/plain")
		ctx.SetBodyString(BufBody)
	}
}

// Parts is a body stream of n parts that counts what is read from it.
type Parts struct {
	n    int
	sent *int64
}

func (p *Parts) Read(b []byte) (int, error) {
	if p.n == 0 {
		return 0, io.EOF
	}
	p.n--
	n := copy(b, StreamPart)
	if p.sent != nil {
		*p.sent += int64(n)
	}
	return n, nil
}

func (p *Parts) Close() error { p.sent = nil; return nil }

func (p *Parts) CountInto(n *int64) { p.sent = n }

// Modes runs a test under net/http and under fasthttp, each serving the
// handler wrap makes of the double.
func Modes(t *testing.T, wrap func(http.Handler) http.Handler, test func(t *testing.T, base string, d *Double)) {
	t.Run("nethttp", func(t *testing.T) {
		t.Parallel()
		d := NewDouble()
		h := wrap(struct{ http.Handler }{d})
		if _, ok := h.(front.FastHandler); ok {
			t.Fatalf("%T over a plain http.Handler is a FastHandler", h)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		test(t, srv.URL, d)
	})
	t.Run("fasthttp", func(t *testing.T) {
		t.Parallel()
		d := NewDouble()
		h := wrap(d)
		fh, ok := h.(front.FastHandler)
		if !ok {
			t.Fatalf("%T over a FastHandler is not one", h)
		}
		test(t, ServeFast(t, fh), d)
	})
}

// ServeFast serves h with fasthttp within no limits, until the test ends.
func ServeFast(t *testing.T, h front.FastHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := front.FastServer(h, front.Limits{})
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.ShutdownWithContext(ctx)
	})
	return "http://" + ln.Addr().String()
}

// Get does one request and returns the status and the body read.
func Get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Lines is a writer that hands each line written to a channel.
type Lines chan string

func (l Lines) Write(p []byte) (int, error) {
	for _, s := range strings.SplitAfter(string(p), "\n") {
		if s != "" {
			l <- s
		}
	}
	return len(p), nil
}

func (l Lines) Next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-l:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no access log line")
		return ""
	}
}

// Field is one key and value of a log line, in order.
type Field struct {
	Key   string
	Value any
}

// ParseLine reads a JSON log line as its fields, in order.
func ParseLine(t *testing.T, line string) []Field {
	t.Helper()
	if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
		t.Fatalf("not one line: %q", line)
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %q", line)
	}
	var fs []Field
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		fs = append(fs, Field{k.(string), v})
	}
	return fs
}
