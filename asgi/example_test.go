package asgi_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/asgi"
)

// An ASGI application with its lifespan, mounted under /api/ beside a Go
// handler. Startup runs the lifespan startup before the server listens;
// Shutdown, after the server has stopped, runs the lifespan shutdown and
// stops the event loop.
func ExampleNew() {
	app, err := m0.LoadApp("greeter:app", &m0.LoadOptions{Dir: "testdata"})
	if err != nil {
		log.Fatal(err)
	}
	h := asgi.New(app, nil)
	if err := h.Startup(context.Background()); err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok from Go\n")
	})

	// A program would run an http.Server, with
	// srv.RegisterOnShutdown(h.Drain) so streaming responses end when it
	// shuts down; the example serves the mux on a test server.
	srv := httptest.NewServer(mux)
	for _, path := range []string{"/healthz", "/api/items"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %d %s", path, resp.StatusCode, body)
	}
	srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fmt.Println("shutdown:", h.Shutdown(ctx))
	// Output:
	// /healthz 200 ok from Go
	// /api/items 200 hello from the lifespan startup, at /api/items
	// shutdown: <nil>
}
