package middleware_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/m0serve/m0/metrics"
	"github.com/m0serve/m0/middleware"
)

// The middleware m0serve puts around an application, around a Go
// handler: the access log outermost, then the metrics, then the health
// path, answered in Go.
func Example() {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "the application\n")
	})
	var accessLog bytes.Buffer
	h := middleware.AccessLog(&accessLog)(metrics.Middleware(metrics.Path)(middleware.Health("/healthz")(mux)))

	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, path := range []string{"/", "/healthz", metrics.Path} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch path {
		case "/healthz":
			var health struct{ Status string }
			json.Unmarshal(body, &health)
			fmt.Println(path, resp.StatusCode, health.Status)
		case metrics.Path:
			for _, line := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(line, "m0_http_request_duration_seconds_count") {
					fmt.Println(path, resp.StatusCode, line)
				}
			}
		default:
			fmt.Print(path, " ", resp.StatusCode, " ", string(body))
		}
	}
	sc := bufio.NewScanner(&accessLog)
	for sc.Scan() {
		var line struct {
			Msg, Method, Path string
			Status            int
		}
		json.Unmarshal(sc.Bytes(), &line)
		fmt.Println(line.Msg, line.Method, line.Path, line.Status)
	}
	// Output:
	// / 200 the application
	// /healthz 200 ok
	// /__metrics 200 m0_http_request_duration_seconds_count{code="200",method="GET"} 2
	// access GET / 200
	// access GET /healthz 200
	// access GET /__metrics 200
}
