// Command go_host is the smallest complete Go application on the m0 host:
// a JSON handler, a page, a clock published by a producer and held as an
// SSE stream, under the same flags, doctor, limits and drain as m0serve.
//
//	go run ./examples/go_host --port 8000
//	go run ./examples/go_host --doctor
//	M0_BLOCKING_THREADS=4 go run ./examples/go_host
package main

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/m0serve/m0/host"
	"github.com/m0serve/m0/realtime"
)

// app is the application: the host calls Make once per accept loop and
// once per pool thread behind it, so each builds its own handler.
type app struct{}

func (app) Make(ctx host.Context) (http.Handler, error) {
	mux := host.NewMux()
	// On a pool thread when there is a pool (--blocking-threads N).
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"hello": "world", "worker": ctx.Worker, "thread": ctx.Thread})
	})
	// A stream is begun on the loop: the host holds it from there.
	mux.HandleLoopFunc("GET /clock", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(realtime.HeaderHold, "stream")
		w.Header().Set(realtime.HeaderChannel, "clock")
	})
	mux.HandleLoopFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	})
	return mux, nil
}

// Producer is the clock: it runs on worker 0, off the request path, every
// second (M0_APP_TICK_MS sets another cadence).
func (app) Producer() host.Producer { return clock{} }

type clock struct{}

func (clock) Make(host.Context) error { return nil }

// Step publishes the time and asks to be called again a tick later.
func (clock) Step(out host.Publisher) time.Duration {
	out.Publish("clock", out.NextID(), []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	return time.Second
}

const page = `<!doctype html>
<title>go_host</title>
<p>The time, from the producer: <output id="now">…</output></p>
<script>
new EventSource("/clock").onmessage = (e) => { document.getElementById("now").textContent = e.data; };
</script>
`

func main() { host.Main(app{}) }
