package asgi_test

import (
	"context"
	"log"
	"net/http"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/asgi"
)

// A Go program serves a FastAPI application under /api/ beside its own
// handlers. The lifespan startup runs before the listener opens.
func Example() {
	app, err := m0.LoadApp("main:app", "path/to/project", "")
	if err != nil {
		log.Fatal(err)
	}
	h, err := asgi.New(app, &asgi.Options{Loop: "auto"})
	if err != nil {
		log.Fatal(err)
	}
	if err := h.Startup(context.Background()); err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	})
	srv := &http.Server{Addr: ":8080", Handler: mux}
	srv.RegisterOnShutdown(func() { h.Drain() }) // streaming responses end
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Fatal(err)
	}
	h.Shutdown(context.Background()) // the lifespan shutdown; the loop stops
}
