package wire

import (
	"bufio"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// DefaultMaxBody is the request body cap m0serve's --max-body defaults to,
// and the one a handler built with nil options applies: 4 MiB.
const DefaultMaxBody = 4 << 20

// The request's user values under fasthttp through which a handler that
// writes its response to the connection itself (a hijack) tells the access
// log and the metrics what it sent: the body's bytes as an int64, and when
// the head went out as a time.Time.
const (
	KeySent = "m0.sent"
	KeyHead = "m0.head"
)

// ErrorBody is the plain-text body of a response the server gives itself:
// the status's text and a newline. The details of a failure go to the log,
// never to the client.
func ErrorBody(status int) string {
	if t := http.StatusText(status); t != "" {
		return t + "\n"
	}
	return strconv.Itoa(status) + "\n"
}

// RetryAfter is the Retry-After of every 503 the server gives itself (a
// drain's, a cut-off's): one second, by when another worker, or the one
// replacing this, serves.
const RetryAfter = "1"

// Error answers status with ErrorBody on net/http. close also ends the
// connection after it (a drain's 503).
func Error(w http.ResponseWriter, status int, close bool) {
	Answer(w, status, ErrorBody(status), close)
}

// FastError answers status with ErrorBody on fasthttp, in place of any
// response begun; see Error.
func FastError(ctx *fasthttp.RequestCtx, status int, close bool) {
	FastAnswer(ctx, status, ErrorBody(status), close)
}

// Answer is every answer the server gives itself on net/http, an error or
// a refusal of the strict reading: status with body as plain text, never
// sniffed, and with close the connection ended after it.
func Answer(w http.ResponseWriter, status int, body string, close bool) {
	h := w.Header()
	AnswerHeaders(status, func(name, value string) { h[name] = []string{value} })
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	if close {
		h["Connection"] = []string{"close"}
	}
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// AnswerHeaders gives fn the headers of every answer the server gives
// itself, whichever front end writes it: plain text, never sniffed, and a
// 503's Retry-After.
func AnswerHeaders(status int, fn func(name, value string)) {
	fn("Content-Type", "text/plain; charset=utf-8")
	fn("X-Content-Type-Options", "nosniff")
	if status == http.StatusServiceUnavailable {
		fn("Retry-After", RetryAfter)
	}
}

// FastAnswer is Answer on fasthttp, in place of any response begun.
func FastAnswer(ctx *fasthttp.RequestCtx, status int, body string, close bool) {
	resp := &ctx.Response
	resp.Reset()
	resp.SetStatusCode(status)
	AnswerHeaders(status, resp.Header.Set)
	resp.SetBodyString(body)
	if close {
		resp.SetConnectionClose()
	}
}

// closed is what a second Shutdown of a handler returns.
type closed struct{ pkg string }

func (e closed) Error() string        { return e.pkg + ": handler already shut down" }
func (e closed) Is(target error) bool { return target == http.ErrServerClosed }

// Closed returns the error a handler of package pkg returns from a second
// Shutdown: it names the package, and every handler's is
// http.ErrServerClosed to errors.Is.
func Closed(pkg string) error { return closed{pkg} }

// AutoThreads is the thread count that means min(cores, 8): m0serve's
// --blocking-threads auto, and the bridges' default.
const AutoThreads = -1

// Setting resolves one field of a handler's options by the rule every
// options struct of the module follows: zero is def, the default; a
// negative is off, returned as 0; any other value is itself.
func Setting[T ~int | ~int64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Off is the value that turns a setting off where the configuration spells
// off as 0 (--max-body 0, --idle-timeout 0): the named negative the
// options take for it.
func Off[T ~int | ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// PoolSize is the number of Python threads a thread count resolves to:
// AutoThreads (any negative count) is min(cores, 8), counting the CPUs the
// process may run on, or one a core when parallel (a free-threaded
// CPython, whose threads run Python at once: past the cores more threads
// only overlap waits, as on a GIL build, and the cap of 8 would leave
// cores idle); 0 is no pool.
func PoolSize(n int, parallel bool) int {
	switch {
	case n >= 0:
		return n
	case parallel:
		return runtime.NumCPU()
	}
	return min(runtime.NumCPU(), 8)
}

// StreamDirect writes a response on the connection of a request fasthttp
// parsed, past fasthttp: the head (WriteHead: the headers each gives, a
// Content-Length when length is not negative, Connection: close), then
// every part next gives, each flushed as it comes, until next returns an
// error or the client leaves. With write false the parts are taken and
// dropped (a HEAD whose application runs to its end); a nil next sends the
// head alone. The connection closes after it, and what was sent is kept
// for the access log (KeyHead, KeySent). A bridge streams this way where
// fasthttp cannot: a body of known length, whose parts fasthttp would hold
// back until its buffer fills, and HTTP/1.0, which has no chunks.
func StreamDirect(ctx *fasthttp.RequestCtx, status int, each func(fn func(name, value []byte)), length int64, write bool, next func() ([]byte, error)) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status) // for the access log; fasthttp writes no response
	w := bufio.NewWriterSize(ctx.Conn(), 4096)
	WriteHead(w, ctx.Request.Header.IsHTTP11(), status, each, length)
	// Closed after the body, on a server that keeps hijacked connections
	// too: fasthttp writes nothing more.
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) { c.Close() })
	ctx.SetUserValue(KeyHead, time.Now())
	var sent int64
	defer func() { ctx.SetUserValue(KeySent, sent) }()
	if next == nil {
		w.Flush()
		return
	}
	for {
		b, err := next()
		if len(b) > 0 && write {
			w.Write(b)
			sent += int64(len(b))
		}
		if w.Flush() != nil {
			return // the client left
		}
		if err != nil {
			return // whole or not, the connection closes
		}
	}
}

// StreamBody is the body stream a bridge hands fasthttp for a response it
// streams (Response.SetBodyStream): fasthttp reads it after the handler
// returned, each Read taking from the part in hand, or from the next part
// next gives once that is used up, until next returns an error. What each
// Read gives is counted where CountInto says (the access log's and the
// metrics' byte count, SentCounter). The zero StreamBody is ready; Reset
// makes it so again.
type StreamBody struct {
	part []byte
	err  error
	sent *int64
}

// Read fills p from the parts next gives, as an io.Reader's Read.
func (b *StreamBody) Read(p []byte, next func() ([]byte, error)) (int, error) {
	for len(b.part) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.part, b.err = next()
	}
	n := copy(p, b.part)
	b.part = b.part[n:]
	if b.sent != nil {
		*b.sent += int64(n)
	}
	return n, nil
}

// CountInto has every byte Read gives from here on added to *n.
func (b *StreamBody) CountInto(n *int64) { b.sent = n }

// Reset makes b the zero StreamBody, for a pooled exchange's next request.
func (b *StreamBody) Reset() { *b = StreamBody{} }
