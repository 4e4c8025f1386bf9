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
// a directory's files in front of any handler. This package adds the
// middleware m0serve puts around an application, each usable around any
// handler: [Health] answers a liveness path in Go, and [AccessLog] writes
// one JSON line per response; package metrics exposes Prometheus metrics.
//
// Each handler also serves requests that fasthttp parsed
// (ServeFastHTTP), which is how the m0serve command listens; a middleware
// of this package wrapping such a handler is one too ([FastHandler]).
//
// One interpreter serves the process: the first LoadApp starts it, with
// the libpython of the python3 on PATH (an activated virtualenv's), or the
// library M0_PYTHON_LIBRARY names. See docs/embedding.md.
package m0
