package realtime_test

import (
	"bufio"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/m0serve/m0/realtime"
)

// A hub serves SSE two ways on one mux: its broker, for a Go program's
// own streams, and the holds middleware, through which any handler (a
// Python bridge, or a Go handler as here) turns its answer into a stream
// held in Go. A client that reconnects with Last-Event-ID is sent what it
// missed, in order, before anything live.
func Example() {
	hub := realtime.New(nil)
	defer hub.Drain()

	mux := http.NewServeMux()
	mux.Handle("GET /events/{channel}", hub.Broker(func(r *http.Request) string { return r.PathValue("channel") }))
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, r *http.Request) {
		// A view approves a hold; Go holds the connection from here on.
		w.Header().Set(realtime.HeaderHold, "stream")
		w.Header().Set(realtime.HeaderChannel, "news")
	})
	srv := httptest.NewServer(realtime.Holds(hub, nil)(mux))
	defer srv.Close()

	seen := hub.Newest() // the id a client last saw
	hub.Publish("news", []byte("first"))
	hub.Publish("news", []byte("second"))

	for _, path := range []string{"/events/news", "/live"} {
		req, err := http.NewRequest("GET", srv.URL+path, nil)
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("Last-Event-ID", seen.String())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(path, resp.StatusCode, resp.Header.Get("Content-Type"))
		sc := bufio.NewScanner(resp.Body)
		for n := 0; n < 2 && sc.Scan(); {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				fmt.Println(" ", data)
				n++
			}
		}
		resp.Body.Close()
	}
	// Output:
	// /events/news 200 text/event-stream
	//   first
	//   second
	// /live 200 text/event-stream
	//   first
	//   second
}
