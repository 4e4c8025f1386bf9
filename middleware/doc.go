// Package middleware is what m0serve puts around every application, each
// piece usable around any http.Handler: [Health] answers a liveness path
// in Go, and [AccessLog] writes one JSON line per response. Package metrics
// adds Prometheus metrics the same way.
//
// Each middleware wrapping a [FastHandler] is one too, so a stack of them
// around a bridge or the static handler is still served by fasthttp. The
// package has no cgo: a Go program that serves no Python links none.
package middleware
