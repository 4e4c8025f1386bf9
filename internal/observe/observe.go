// Package observe is what the access log and the metrics learn of each
// response, under either front end, and how the server tells them of the
// requests it refused before any handler ran.
package observe

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// Outcome is what an observer learns of one response.
type Outcome struct {
	Status int
	Dur    time.Duration // from the request's headers to the response's head
	Bytes  int64         // the body as sent; -1 when unknown
	Remote netip.Addr    // the client; invalid when unknown
}

// Refuser is a handler that learns of the requests the server refused
// before they reached it (413, 408, 400, 431): the access log and the
// metrics, which count every response. Each passes the news on to the
// handler it wraps.
type Refuser interface {
	Refused(method, path string, o Outcome)
}

// PassRefused tells next, if it is a Refuser, of a refused request.
func PassRefused(next any, method, path string, o Outcome) {
	if r, ok := next.(Refuser); ok {
		r.Refused(method, path, o)
	}
}

// Conn is what net/http's handlers know of their connection: the server
// stores it in each request's context under ConnKey.
type Conn struct {
	Conn     net.Conn
	Requests int // served so far; one request at a time on HTTP/1
}

// ConnKey is the context key of a request's *Conn.
type ConnKey struct{}

// starter is a connection that knows when the request being read began to
// arrive (the limits listener's).
type starter interface{ RequestStart() time.Time }

// RequestStart returns when the request being served on c began to arrive,
// or the zero time when c keeps no such mark.
func RequestStart(c net.Conn) time.Time {
	if s, ok := c.(starter); ok {
		return s.RequestStart()
	}
	return time.Time{}
}

// FastStart returns when the request on ctx began to arrive: the first
// bytes of its head, where its connection keeps that mark (m0serve's
// listener does), else ctx.Time (when its handler was called; under
// fasthttp's LazyRequestTime, when it is first read: call FastStart
// before the handler), else when its connection opened.
func FastStart(ctx *fasthttp.RequestCtx) time.Time {
	if t := RequestStart(ctx.Conn()); !t.IsZero() {
		return t
	}
	if t := ctx.Time(); !t.IsZero() {
		return t
	}
	return ctx.ConnTime()
}

// Recorder is a ResponseWriter that notes the status, the body's length
// and when the head went out. Unwrap lets http.ResponseController reach
// the writer below.
type Recorder struct {
	http.ResponseWriter
	start  time.Time
	head   time.Time // the first Flush; zero until then
	status int       // zero until the head is written
	bytes  int64
}

// Observe serves r with next through a Recorder and returns it.
func Observe(w http.ResponseWriter, r *http.Request, next http.Handler) *Recorder {
	rec := &Recorder{ResponseWriter: w, start: time.Now()}
	// From the request's headers: the limits read the body before this.
	if cs, ok := r.Context().Value(ConnKey{}).(*Conn); ok {
		if t := RequestStart(cs.Conn); !t.IsZero() && t.Before(rec.start) {
			rec.start = t
		}
	}
	next.ServeHTTP(rec, r)
	return rec
}

// Outcome is what was recorded of the response to r.
func (rec *Recorder) Outcome(r *http.Request) Outcome {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	head := rec.head
	if head.IsZero() {
		head = time.Now()
	}
	n := rec.bytes
	if r.Method == http.MethodHead || !wire.BodyAllowed(status) {
		n = 0
	}
	o := Outcome{Status: status, Dur: head.Sub(rec.start), Bytes: n}
	o.Remote = wire.ClientOf(r).Addr()
	return o
}

func (rec *Recorder) WriteHeader(code int) {
	// An informational head (103 Early Hints) is followed by the real one.
	if rec.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *Recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(p)
	rec.bytes += int64(n)
	return n, err
}

// ReadFrom keeps the writer's own ReadFrom (sendfile) in use.
func (rec *Recorder) ReadFrom(r io.Reader) (int64, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := rec.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{rec.ResponseWriter}, r)
	}
	rec.bytes += n
	return n, err
}

// FlushError flushes the writer below; the first flush sends the head.
func (rec *Recorder) FlushError() error {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.head.IsZero() {
		rec.head = time.Now()
	}
	return http.NewResponseController(rec.ResponseWriter).Flush()
}

func (rec *Recorder) Flush() { rec.FlushError() }

// Hijack hands the connection over, as the writer below does. A handler
// that hijacks before writing a head switches protocols (a WebSocket
// upgrade writes its 101 to the connection itself).
func (rec *Recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if rec.status == 0 {
		rec.status = http.StatusSwitchingProtocols
		rec.head = time.Now()
	}
	return http.NewResponseController(rec.ResponseWriter).Hijack()
}

func (rec *Recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// counter is a fasthttp body stream that counts the bytes fasthttp takes
// from it (middleware.SentCounter).
type counter interface{ CountInto(n *int64) }

// fastRecord is one request's observation under fasthttp, shared by every
// observer of the request: the outermost one owns it, and the others add
// their callbacks. It is stored in the request's user values, which
// fasthttp closes once it has written the response, streamed body included.
type fastRecord struct {
	o       Outcome
	sent    int64
	counted bool
	done    []func(*fasthttp.RequestCtx, Outcome)
	ctx     *fasthttp.RequestCtx
}

type fastRecordKey struct{}

var fastRecords = sync.Pool{New: func() any { return new(fastRecord) }}

// ObserveFast serves ctx with next and calls done once with the outcome:
// when next returns, or for a streamed body when fasthttp closes it.
func ObserveFast(ctx *fasthttp.RequestCtx, next fasthttp.RequestHandler, done func(*fasthttp.RequestCtx, Outcome)) {
	if rec, ok := ctx.UserValue(fastRecordKey{}).(*fastRecord); ok {
		rec.done = append(rec.done, done)
		next(ctx)
		return
	}
	rec := fastRecords.Get().(*fastRecord)
	rec.ctx = ctx
	rec.done = append(rec.done, done)
	ctx.SetUserValue(fastRecordKey{}, rec)
	start := FastStart(ctx) // before the handler: ctx.Time may be read only now
	next(ctx)

	resp := &ctx.Response
	rec.o.Status = resp.StatusCode()
	rec.o.Dur = time.Since(start)
	if ip := wire.Client(ctx).Addr(); ip.IsValid() && !ip.IsUnspecified() {
		rec.o.Remote = ip
	}
	switch {
	case ctx.IsHead() || !wire.BodyAllowed(rec.o.Status) || resp.SkipBody:
		rec.o.Bytes = 0
	case ctx.Hijacked():
		// The handler wrote the response to the connection itself, and may
		// say how: wire.KeySent and wire.KeyHead.
		rec.o.Bytes = -1
		if n, ok := ctx.UserValue(wire.KeySent).(int64); ok {
			rec.o.Bytes = n
		}
		if head, ok := ctx.UserValue(wire.KeyHead).(time.Time); ok {
			rec.o.Dur = head.Sub(start)
		}
	case resp.IsBodyStream():
		if n := resp.Header.ContentLength(); n >= 0 {
			rec.o.Bytes = int64(n)
		} else if c, ok := resp.BodyStream().(counter); ok {
			rec.counted = true
			c.CountInto(&rec.sent)
		} else {
			rec.o.Bytes = -1
		}
		return // Close finishes it
	default:
		rec.o.Bytes = int64(len(resp.Body()))
	}
	ctx.RemoveUserValue(fastRecordKey{})
	rec.finish()
}

// Close is fasthttp's word that the response is over.
func (rec *fastRecord) Close() error {
	if rec.ctx != nil {
		if rec.counted {
			rec.o.Bytes = rec.sent
		}
		rec.finish()
	}
	return nil
}

func (rec *fastRecord) finish() {
	for i := len(rec.done) - 1; i >= 0; i-- {
		rec.done[i](rec.ctx, rec.o)
	}
	clear(rec.done)
	*rec = fastRecord{done: rec.done[:0]}
	fastRecords.Put(rec)
}

// MetricsPath is where m0serve --metrics serves the exposition (package
// metrics' Path).
const MetricsPath = "/__metrics"
