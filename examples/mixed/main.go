// Command mixed is one Go binary serving a Go JSON handler, a Flask
// application under /flask, a FastAPI application under /api, static files
// under /static, and a clock a Go producer publishes, which the Flask page
// shows live over SSE through a signed stream URL held at /streams.
//
//	export M0_GRANT_KEY=$(head -c 32 /dev/urandom | base64)
//	go run ./examples/mixed --app-dir examples/mixed --port 8000
//
// Open http://localhost:8000/flask/ and watch the clock.
package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"runtime"
	"time"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/asgi"
	"github.com/m0serve/m0/host"
	"github.com/m0serve/m0/static"
)

type app struct{}

// MaxThreads is 1: the Python applications share the process's one
// interpreter, so more loops would only copy their handlers.
func (app) MaxThreads() int { return 1 }

// LoadsPython: Make loads the Flask and FastAPI applications, so the host
// checks the interpreter first and takes --app-dir, --loop and --qos.
func (app) LoadsPython() bool { return true }

// hello is the Go JSON handler: on a pool thread when there is a pool
// (--blocking-threads N), on the loop otherwise.
func hello(ctx host.Context) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"hello": "from Go", "go": runtime.Version(),
			"thread": ctx.Thread, "newest_event": ctx.Hub.Newest().String()})
	}
}

func (app) Make(ctx host.Context) (http.Handler, error) {
	mux := host.NewMux()
	mux.HandleFunc("GET /hello", hello(ctx))
	if ctx.Thread > 0 {
		return mux, nil // a pool thread's handler: the Go routes alone
	}
	cfg := ctx.Config
	keys, err := host.GrantKeys(cfg)
	if err != nil {
		return nil, err // exit 78: the stream URLs cannot be verified
	}
	dir := cfg.AppDir
	flask, err := m0.LoadApp("flask_site.app:app", &m0.LoadOptions{Dir: dir, Protocol: "wsgi"})
	if err != nil {
		return nil, err
	}
	api, err := m0.LoadApp("api.main:app", &m0.LoadOptions{Dir: dir, Protocol: "asgi"})
	if err != nil {
		return nil, err
	}
	files, err := static.New(filepath.Join(dir, "static"), &static.Options{Prefix: "/static"})
	if err != nil {
		return nil, err
	}
	// Flask sees SCRIPT_NAME=/flask, FastAPI root_path=/api, so the links
	// they build carry the prefix.
	// The host's mapping of its configuration to each bridge's options:
	// the same pool, body cap, loop and WebSocket close wait as m0serve's.
	flaskH := ctx.Bridge(flask, "/flask")
	apiH := asgi.New(api, host.ASGIOptions(cfg, "/api"))
	ctx.Ready(apiH.Startup) // FastAPI's lifespan, before the listener opens
	ctx.Drain(apiH)
	ctx.Drain(files)
	m0.PublishTo(ctx.Hub)

	// The Python applications run on their own pools and the stream is
	// held by the host, so their routes are answered on the loop and
	// never queued behind the Go pool.
	mux.HandleLoop("/flask/", flaskH)
	mux.HandleLoop("/api/", apiH)
	mux.HandleLoop("/static/", files)
	mux.HandleLoop("GET /streams", ctx.Hub.HoldMount("/streams", host.MountOptions(keys)))
	mux.HandleLoop("GET /{$}", http.RedirectHandler("/flask/", http.StatusFound))
	return mux, nil
}

// Producer publishes the time to "clock" every second (M0_APP_TICK_MS
// sets another cadence).
func (app) Producer() host.Producer { return clock{} }

type clock struct{}

func (clock) Make(host.Context) error { return nil }

func (clock) Step(out host.Publisher) time.Duration {
	out.Publish("clock", out.NextID(), []byte(time.Now().UTC().Format("15:04:05.000")))
	return time.Second
}

func main() { host.Main(app{}) }
