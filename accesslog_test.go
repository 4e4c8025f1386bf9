package m0

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// double is a Go application standing in for the WSGI handler: it answers
// both front ends, with buffered and streamed bodies.
//
//	/buf     "hello, world" (12 bytes)
//	/stream  three parts of 5 bytes, of unknown length, counted (SentCounter)
//	/plain   the same stream without SentCounter
//	/sized   the same stream with its length given
//	/empty   204
//
// calls counts the requests that reached it.
type double struct{ calls chan string }

func newDouble() *double { return &double{calls: make(chan string, 100)} }

const (
	bufBody    = "hello, world"
	streamPart = "part."
	streamN    = 3
)

func (d *double) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.calls <- r.URL.Path
	switch r.URL.Path {
	case "/stream", "/plain", "/sized":
		if r.URL.Path == "/sized" {
			w.Header().Set("Content-Length", "15")
		}
		for range streamN {
			io.WriteString(w, streamPart)
			http.NewResponseController(w).Flush()
		}
	case "/empty":
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, bufBody)
	}
}

func (d *double) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	d.calls <- string(ctx.Path())
	switch string(ctx.Path()) {
	case "/stream":
		ctx.SetBodyStream(&parts{n: streamN}, -1)
	case "/plain":
		ctx.SetBodyStream(struct{ io.Reader }{&parts{n: streamN}}, -1)
	case "/sized":
		ctx.SetBodyStream(&parts{n: streamN}, streamN*len(streamPart))
	case "/empty":
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	default:
		ctx.SetContentType("text/plain")
		ctx.SetBodyString(bufBody)
	}
}

// parts is a body stream of n parts that counts what is read from it.
type parts struct {
	n    int
	sent *int64
}

func (p *parts) Read(b []byte) (int, error) {
	if p.n == 0 {
		return 0, io.EOF
	}
	p.n--
	n := copy(b, streamPart)
	if p.sent != nil {
		*p.sent += int64(n)
	}
	return n, nil
}

func (p *parts) Close() error { p.sent = nil; return nil }

func (p *parts) CountInto(n *int64) { p.sent = n }

// modes runs a test under net/http and under fasthttp, each serving the
// handler wrap makes of the double.
func modes(t *testing.T, wrap func(http.Handler) http.Handler, test func(t *testing.T, base string, d *double)) {
	t.Run("nethttp", func(t *testing.T) {
		t.Parallel()
		d := newDouble()
		h := wrap(struct{ http.Handler }{d})
		if _, ok := h.(FastHandler); ok {
			t.Fatalf("%T over a plain http.Handler is a FastHandler", h)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		test(t, srv.URL, d)
	})
	t.Run("fasthttp", func(t *testing.T) {
		t.Parallel()
		d := newDouble()
		h := wrap(d)
		fh, ok := h.(FastHandler)
		if !ok {
			t.Fatalf("%T over a FastHandler is not one", h)
		}
		test(t, serveFast(t, fh), d)
	})
}

func serveFast(t *testing.T, h FastHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := FastServer(h, Limits{})
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.ShutdownWithContext(ctx)
	})
	return "http://" + ln.Addr().String()
}

// get does one request and returns the status and the body read.
func get(t *testing.T, method, url string) (int, string) {
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

// lines is a writer that hands each line written to a channel.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	for _, s := range strings.SplitAfter(string(p), "\n") {
		if s != "" {
			l <- s
		}
	}
	return len(p), nil
}

func (l lines) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-l:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no access log line")
		return ""
	}
}

// field is one key and value of a log line, in order.
type field struct {
	key   string
	value any
}

func parseLine(t *testing.T, line string) []field {
	t.Helper()
	if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
		t.Fatalf("not one line: %q", line)
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %q", line)
	}
	var fs []field
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		fs = append(fs, field{k.(string), v})
	}
	return fs
}

var utcMillisRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestAccessLog(t *testing.T) {
	tests := []struct {
		method, path string
		status       int
		bytes        int64
		bytesNet     int64 // under net/http, when it differs
	}{
		{"GET", "/buf", 200, int64(len(bufBody)), -2},
		{"GET", "/buf?q=1", 200, int64(len(bufBody)), -2},
		{"HEAD", "/buf", 200, 0, -2},
		{"POST", "/buf", 200, int64(len(bufBody)), -2},
		{"GET", "/stream", 200, streamN * int64(len(streamPart)), -2},
		{"HEAD", "/stream", 200, 0, -2},
		{"GET", "/sized", 200, streamN * int64(len(streamPart)), -2},
		// Without SentCounter fasthttp's chunked stream cannot be counted.
		{"GET", "/plain", 200, -1, streamN * int64(len(streamPart))},
		{"GET", "/empty", 204, 0, -2},
	}
	for _, mode := range []string{"nethttp", "fasthttp"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			out := make(lines, 100)
			d := newDouble()
			var base string
			if mode == "fasthttp" {
				h, ok := AccessLog(out, d).(FastHandler)
				if !ok {
					t.Fatal("AccessLog over a FastHandler is not one")
				}
				base = serveFast(t, h)
			} else {
				h := AccessLog(out, struct{ http.Handler }{d})
				if _, ok := h.(FastHandler); ok {
					t.Fatal("AccessLog over an http.Handler is a FastHandler")
				}
				srv := httptest.NewServer(h)
				t.Cleanup(srv.Close)
				base = srv.URL
			}
			for _, tt := range tests {
				t.Run(tt.method+" "+tt.path, func(t *testing.T) {
					start := time.Now().UTC().Truncate(time.Millisecond)
					status, _ := get(t, tt.method, base+tt.path)
					if status != tt.status {
						t.Fatalf("status %d, want %d", status, tt.status)
					}
					fs := parseLine(t, out.next(t))
					keys := make([]string, len(fs))
					for i, f := range fs {
						keys[i] = f.key
					}
					want := "time level msg method path status dur_us bytes remote_addr"
					if got := strings.Join(keys, " "); got != want {
						t.Fatalf("fields %q, want %q", got, want)
					}
					v := map[string]any{}
					for _, f := range fs {
						v[f.key] = f.value
					}
					ts, _ := v["time"].(string)
					if !utcMillisRE.MatchString(ts) {
						t.Errorf("time %q is not UTC with milliseconds", ts)
					} else if tm, _ := time.Parse(time.RFC3339Nano, ts); tm.Before(start) || tm.After(time.Now().Add(time.Second)) {
						t.Errorf("time %q is not now (%s)", ts, start)
					}
					path, _, _ := strings.Cut(tt.path, "?")
					for k, want := range map[string]string{"level": "INFO", "msg": "access", "method": tt.method, "path": path, "remote_addr": "127.0.0.1"} {
						if v[k] != want {
							t.Errorf("%s = %#v, want %q", k, v[k], want)
						}
					}
					wantBytes := tt.bytes
					if mode == "nethttp" && tt.bytesNet != -2 {
						wantBytes = tt.bytesNet
					}
					for k, want := range map[string]int64{"status": int64(tt.status), "bytes": wantBytes} {
						n, ok := v[k].(json.Number)
						if !ok {
							t.Errorf("%s = %#v, not a number", k, v[k])
							continue
						}
						if got, err := n.Int64(); err != nil || got != want {
							t.Errorf("%s = %s, want %d", k, n, want)
						}
					}
					if n, ok := v["dur_us"].(json.Number); !ok {
						t.Errorf("dur_us = %#v, not a number", v["dur_us"])
					} else if us, err := n.Int64(); err != nil || us < 0 || us > int64(time.Minute/time.Microsecond) {
						t.Errorf("dur_us = %s", n)
					}
				})
			}
		})
	}
}

func TestAccessLogRemoteAddrUnknown(t *testing.T) {
	var out bytes.Buffer
	h := AccessLog(&out, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "x")
	}))
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = "@"
	h.ServeHTTP(httptest.NewRecorder(), r)
	fs := parseLine(t, out.String())
	if last := fs[len(fs)-1].key; last != "bytes" {
		t.Errorf("last field %q, want bytes (remote_addr left out): %s", last, out.String())
	}
}

func TestAccessLogIPv4MappedUnmapped(t *testing.T) {
	var out bytes.Buffer
	h := AccessLog(&out, http.NotFoundHandler())
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = "[::ffff:127.0.0.1]:4242"
	h.ServeHTTP(httptest.NewRecorder(), r)
	if !strings.Contains(out.String(), `"status":404,`) || !strings.HasSuffix(out.String(), `"remote_addr":"127.0.0.1"}`+"\n") {
		t.Errorf("line %s", out.String())
	}
}

// TestRecorderKeepsWriter checks that a handler below AccessLog still
// flushes through the ResponseController and finds the writer below.
func TestRecorderKeepsWriter(t *testing.T) {
	var out bytes.Buffer
	flushed := false
	h := AccessLog(&out, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "x")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		_, flushed = w.(interface{ Unwrap() http.ResponseWriter }).Unwrap().(*httptest.ResponseRecorder)
	}))
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("GET", "/x", nil))
	if !rr.Flushed || !flushed {
		t.Errorf("flushed %v, unwrapped to the recorder %v", rr.Flushed, flushed)
	}
}
