// Package front is the two HTTP/1.x front ends every m0 handler is served
// by: fasthttp for a handler that can take its requests (ServeFastHTTP),
// net/http for any other. Both read each connection through the strict
// reading of internal/strict, bound bodies, sends and idle connections by the
// same Limits, and drain the same way; the fan listener spreads one
// listener's connections over several accept loops.
package front
