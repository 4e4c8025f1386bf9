package middleware_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/m0serve/m0/middleware"
)

// TestLimiter: past its bound a request is answered 503 with Retry-After
// without reaching the handler; a WebSocket upgrade is not counted; the
// first refusal is logged once.
func TestLimiter(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Done()
		<-release
	})
	var lines []string
	l := middleware.NewLimiter(2, func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) })
	h := l.Wrap(inner)
	entered.Add(2)
	var done sync.WaitGroup
	for range 2 {
		done.Add(1)
		go func() {
			defer done.Done()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}()
	}
	entered.Wait()
	if n := l.InFlight(); n != 2 {
		t.Fatalf("in flight %d, want 2", n)
	}
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" {
			t.Errorf("past the bound: %d %v", rec.Code, rec.Header())
		}
	}
	entered.Add(1)
	up := httptest.NewRequest("GET", "/ws", nil)
	up.Header.Set("Upgrade", "websocket")
	up.Header.Set("Connection", "Upgrade")
	done.Add(1)
	go func() {
		defer done.Done()
		h.ServeHTTP(httptest.NewRecorder(), up)
	}()
	entered.Wait() // an upgrade reached the handler past the bound
	close(release)
	done.Wait()
	if l.Refused() != 2 || l.InFlight() != 0 {
		t.Errorf("refused %d, in flight %d", l.Refused(), l.InFlight())
	}
	if len(lines) != 1 {
		t.Errorf("logged %q, want one line", lines)
	}
}
