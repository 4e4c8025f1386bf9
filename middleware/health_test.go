package middleware

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/m0serve/m0/internal/observe/observetest"
)

func TestHealth(t *testing.T) {
	observetest.Modes(t, func(h http.Handler) http.Handler { return Health("/health")(h) }, func(t *testing.T, base string, d *observetest.Double) {
		tests := []struct {
			method, path string
			answered     bool
		}{
			{"GET", "/health", true},
			{"HEAD", "/health", true},
			{"GET", "/health?verbose=1", true},
			{"POST", "/health", false},
			{"GET", "/health/", false},
			{"GET", "/healthz", false},
			{"GET", "/", false},
		}
		for _, tt := range tests {
			t.Run(tt.method+" "+tt.path, func(t *testing.T) {
				req, _ := http.NewRequest(tt.method, base+tt.path, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var reached bool
				select {
				case <-d.Calls:
					reached = true
				default:
				}
				if reached == tt.answered {
					t.Fatalf("reached the application: %v", reached)
				}
				if !tt.answered {
					return
				}
				if resp.StatusCode != 200 {
					t.Errorf("status %d", resp.StatusCode)
				}
				for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"} {
					if got := resp.Header.Get(k); got != want {
						t.Errorf("%s: %q, want %q", k, got, want)
					}
				}
				if resp.ContentLength <= 0 {
					t.Errorf("Content-Length %d", resp.ContentLength)
				}
				var body struct {
					Status string   `json:"status"`
					PID    int      `json:"pid"`
					Uptime *float64 `json:"uptime_s"`
				}
				err = json.NewDecoder(resp.Body).Decode(&body)
				if tt.method == "HEAD" {
					if err == nil {
						t.Errorf("HEAD has a body")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if body.Status != "ok" || body.PID != os.Getpid() || body.Uptime == nil || *body.Uptime < 0 {
					t.Errorf("body %+v", body)
				}
			})
		}
	})
}

func TestHealthEmptyPath(t *testing.T) {
	d := observetest.NewDouble()
	h := Health("")(d)
	for _, path := range []string{"", "/"} {
		r, _ := http.NewRequest("GET", "http://x"+path, nil)
		h.ServeHTTP(nopWriter{}, r)
		select {
		case <-d.Calls:
		default:
			t.Errorf("%q did not reach the application", path)
		}
	}
}

type nopWriter struct{}

func (nopWriter) Header() http.Header         { return http.Header{} }
func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriter) WriteHeader(int)             {}
