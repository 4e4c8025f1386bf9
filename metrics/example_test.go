package metrics_test

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/m0serve/m0/metrics"
	"github.com/m0serve/m0/realtime"
)

// The middleware measures every response of the handler it wraps and
// answers its own path with the exposition; with Realtime it counts a
// hub's frames and held streams too.
func ExampleMiddleware() {
	hub := realtime.New(nil)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	srv := httptest.NewServer(metrics.Middleware(metrics.Path, metrics.Realtime(hub))(mux))
	defer srv.Close()

	hub.Publish("news", []byte("hello"))
	for range 3 {
		resp, err := http.Get(srv.URL + "/page")
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + metrics.Path)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "m0_http_request_duration_seconds_count") || strings.HasPrefix(line, "m0_realtime_frames_published_total") {
			fmt.Println(line)
		}
	}
	// Output:
	// m0_http_request_duration_seconds_count{code="200",method="GET"} 3
	// m0_realtime_frames_published_total 1
}
