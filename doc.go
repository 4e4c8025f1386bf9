// Package m0 serves Python web applications from a Go program, by
// embedding CPython in the process.
//
// A program loads an application with [LoadApp] and mounts it with the
// bridge for its protocol, beside its own handlers on any mux:
//
//	app, err := m0.LoadApp("mysite.wsgi:application", &m0.LoadOptions{Dir: "site"})
//	if err != nil {
//		log.Fatal(err)
//	}
//	http.Handle("/", wsgi.New(app, nil))
//
// The bridges are ordinary http.Handlers: package wsgi (PEP 3333) and
// package asgi (ASGI 3.0: HTTP, WebSocket, lifespan). Package static serves
// a directory's files in front of any handler; package middleware has the
// health path and the access log m0serve puts around an application, and
// package metrics the Prometheus metrics, each usable around any handler.
//
// Each handler also serves requests that fasthttp parsed
// (ServeFastHTTP), which is how the m0serve command listens; a middleware
// wrapping such a handler is one too (middleware.FastHandler). Package host
// is the engine m0serve runs, for a Go program that wants its command line.
//
// One interpreter serves the process: the first LoadApp starts it, with
// the libpython of the python3 on PATH (an activated virtualenv's), or the
// library M0_PYTHON_LIBRARY names. See docs/embedding.md.
package m0
