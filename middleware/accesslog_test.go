package middleware

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/observe/observetest"
)

var utcMillisRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestAccessLog(t *testing.T) {
	tests := []struct {
		method, path string
		status       int
		bytes        int64
		bytesNet     int64 // under net/http, when it differs
	}{
		{"GET", "/buf", 200, int64(len(observetest.BufBody)), -2},
		{"GET", "/buf?q=1", 200, int64(len(observetest.BufBody)), -2},
		{"HEAD", "/buf", 200, 0, -2},
		{"POST", "/buf", 200, int64(len(observetest.BufBody)), -2},
		{"GET", "/stream", 200, observetest.StreamN * int64(len(observetest.StreamPart)), -2},
		{"HEAD", "/stream", 200, 0, -2},
		{"GET", "/sized", 200, observetest.StreamN * int64(len(observetest.StreamPart)), -2},
		// Without SentCounter fasthttp's chunked stream cannot be counted.
		{"GET", "/plain", 200, -1, observetest.StreamN * int64(len(observetest.StreamPart))},
		{"GET", "/empty", 204, 0, -2},
	}
	for _, mode := range []string{"nethttp", "fasthttp"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			out := make(observetest.Lines, 100)
			d := observetest.NewDouble()
			var base string
			if mode == "fasthttp" {
				h, ok := AccessLog(out)(d).(FastHandler)
				if !ok {
					t.Fatal("AccessLog over a FastHandler is not one")
				}
				base = observetest.ServeFast(t, h)
			} else {
				h := AccessLog(out)(struct{ http.Handler }{d})
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
					status, _ := observetest.Get(t, tt.method, base+tt.path)
					if status != tt.status {
						t.Fatalf("status %d, want %d", status, tt.status)
					}
					fs := observetest.ParseLine(t, out.Next(t))
					keys := make([]string, len(fs))
					for i, f := range fs {
						keys[i] = f.Key
					}
					want := "time level msg method path status dur_us bytes remote_addr"
					if got := strings.Join(keys, " "); got != want {
						t.Fatalf("fields %q, want %q", got, want)
					}
					v := map[string]any{}
					for _, f := range fs {
						v[f.Key] = f.Value
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
	h := AccessLog(&out)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "x")
	}))
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = "@"
	h.ServeHTTP(httptest.NewRecorder(), r)
	fs := observetest.ParseLine(t, out.String())
	if last := fs[len(fs)-1].Key; last != "bytes" {
		t.Errorf("last field %q, want bytes (remote_addr left out): %s", last, out.String())
	}
}

func TestAccessLogIPv4MappedUnmapped(t *testing.T) {
	var out bytes.Buffer
	h := AccessLog(&out)(http.NotFoundHandler())
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
	h := AccessLog(&out)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
