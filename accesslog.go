package m0

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// AccessLog returns a handler that serves with next and writes one JSON line
// per response to w:
//
//	{"time":"2026-10-04T17:02:51.789Z","level":"INFO","msg":"access","method":"GET","path":"/","status":200,"dur_us":1234,"bytes":64,"remote_addr":"127.0.0.1"}
//
// time is the wall clock in UTC with milliseconds when the line is written;
// path is the decoded request path without its query; dur_us counts the
// microseconds from the request's headers to its response's head being
// sent; bytes is the body as sent, 0 for a HEAD and for a status that
// carries no body, and -1 when it cannot be known (see [SentCounter]);
// remote_addr is the client's IP as the application sees it, an
// IPv4-mapped IPv6 address written as IPv4, and is left out when the
// server could not read one. A streamed response's line is written when
// its body ends. Lines are written whole, one Write each.
//
// If next is a [FastHandler], so is the handler returned.
func AccessLog(w io.Writer, next http.Handler) http.Handler {
	l := &accessLog{
		log:  slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: utcMillis})),
		next: next,
	}
	if fh, ok := next.(FastHandler); ok {
		return &fastAccessLog{accessLog: l, fast: fh}
	}
	return l
}

// utcMillis writes the record's time in UTC with milliseconds.
func utcMillis(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.String(slog.TimeKey, a.Value.Time().UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	return a
}

type accessLog struct {
	log  *slog.Logger
	next http.Handler
}

func (l *accessLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := observe(w, r, l.next)
	l.write(r.Method, r.URL.Path, rec.outcome(r))
}

func (l *accessLog) write(method, path string, o outcome) {
	attrs := [...]slog.Attr{
		slog.String("method", method),
		slog.String("path", path),
		slog.Int("status", o.status),
		slog.Int64("dur_us", o.dur.Microseconds()),
		slog.Int64("bytes", o.bytes),
		{},
	}
	n := len(attrs) - 1
	if o.remote.IsValid() {
		attrs[n] = slog.String("remote_addr", o.remote.String())
		n++
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "access", attrs[:n]...)
}

// refused logs a response the server gave before next was reached.
func (l *accessLog) refused(method, path string, o outcome) {
	l.write(method, path, o)
	if obs, ok := l.next.(refusalObserver); ok {
		obs.refused(method, path, o)
	}
}

type fastAccessLog struct {
	*accessLog
	fast FastHandler
}

func (l *fastAccessLog) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	observeFast(ctx, l.fast, func(ctx *fasthttp.RequestCtx, o outcome) {
		l.write(string(ctx.Method()), string(ctx.Path()), o)
	})
}

// outcome is what the access log and the metrics learn of one response.
type outcome struct {
	status int
	dur    time.Duration // from the request's headers to the response's head
	bytes  int64         // the body as sent; -1 when unknown
	remote netip.Addr    // the client; invalid when unknown
}

// bodyAllowed reports whether a response with status carries a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// recorder is a ResponseWriter that notes the status, the body's length
// and when the head went out. Unwrap lets http.ResponseController reach
// the writer below.
type recorder struct {
	http.ResponseWriter
	start  time.Time
	head   time.Time // the first Flush; zero until then
	status int       // zero until the head is written
	bytes  int64
}

// observe serves r with next through a recorder.
func observe(w http.ResponseWriter, r *http.Request, next http.Handler) *recorder {
	rec := &recorder{ResponseWriter: w, start: time.Now()}
	// From the request's headers: the limits read the body before this.
	if cs, ok := r.Context().Value(connKey{}).(*connState); ok {
		if t := requestStart(cs.conn); !t.IsZero() && t.Before(rec.start) {
			rec.start = t
		}
	}
	next.ServeHTTP(rec, r)
	return rec
}

func (rec *recorder) outcome(r *http.Request) outcome {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	head := rec.head
	if head.IsZero() {
		head = time.Now()
	}
	n := rec.bytes
	if r.Method == http.MethodHead || !bodyAllowed(status) {
		n = 0
	}
	o := outcome{status: status, dur: head.Sub(rec.start), bytes: n}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		o.remote = ap.Addr().Unmap()
	}
	return o
}

func (rec *recorder) WriteHeader(code int) {
	// An informational head (103 Early Hints) is followed by the real one.
	if rec.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(p)
	rec.bytes += int64(n)
	return n, err
}

// ReadFrom keeps the writer's own ReadFrom (sendfile) in use.
func (rec *recorder) ReadFrom(r io.Reader) (int64, error) {
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
func (rec *recorder) FlushError() error {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.head.IsZero() {
		rec.head = time.Now()
	}
	return http.NewResponseController(rec.ResponseWriter).Flush()
}

func (rec *recorder) Flush() { rec.FlushError() }

// Hijack hands the connection over, as the writer below does. A handler
// that hijacks before writing a head switches protocols (a WebSocket
// upgrade writes its 101 to the connection itself).
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if rec.status == 0 {
		rec.status = http.StatusSwitchingProtocols
		rec.head = time.Now()
	}
	return http.NewResponseController(rec.ResponseWriter).Hijack()
}

func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// A fasthttp handler that writes its response to the connection itself
// (a hijack) tells the access log and the metrics what it sent through
// these user values: the body's bytes as an int64, and when the head went
// out as a time.Time.
const (
	HijackedSent = "m0.sent"
	HijackedHead = "m0.head"
)

// SentCounter is implemented by a fasthttp response body stream that counts
// the bytes fasthttp takes from it: CountInto(n) asks it to add each Read's
// count to *n, on the goroutine that reads it, until it is closed. Without
// it, a streamed body of unknown length under fasthttp is logged with bytes
// -1, since fasthttp closes a body stream that is replaced and so one
// cannot be wrapped after the handler set it. A stream of known length is
// counted as that length.
type SentCounter interface {
	CountInto(n *int64)
}

// fastRecord is one request's observation under fasthttp, shared by every
// observer of the request: the outermost one owns it, and the others add
// their callbacks. It is stored in the request's user values, which
// fasthttp closes once it has written the response, streamed body included.
type fastRecord struct {
	o       outcome
	sent    int64
	counted bool
	done    []func(*fasthttp.RequestCtx, outcome)
	ctx     *fasthttp.RequestCtx
}

type fastRecordKey struct{}

var fastRecords = sync.Pool{New: func() any { return new(fastRecord) }}

// observeFast serves ctx with next and calls done once with the outcome:
// when next returns, or for a streamed body when fasthttp closes it.
func observeFast(ctx *fasthttp.RequestCtx, next FastHandler, done func(*fasthttp.RequestCtx, outcome)) {
	if rec, ok := ctx.UserValue(fastRecordKey{}).(*fastRecord); ok {
		rec.done = append(rec.done, done)
		next.ServeFastHTTP(ctx)
		return
	}
	rec := fastRecords.Get().(*fastRecord)
	rec.ctx = ctx
	rec.done = append(rec.done, done)
	ctx.SetUserValue(fastRecordKey{}, rec)
	next.ServeFastHTTP(ctx)

	// From the request's headers: ctx.Time is when its body had arrived.
	start := ctx.Time()
	if start.IsZero() {
		start = ctx.ConnTime()
	}
	if t := requestStart(ctx.Conn()); !t.IsZero() && t.Before(start) {
		start = t
	}
	resp := &ctx.Response
	rec.o.status = resp.StatusCode()
	rec.o.dur = time.Since(start)
	if a, ok := ctx.RemoteAddr().(interface{ AddrPort() netip.AddrPort }); ok {
		if ip := a.AddrPort().Addr().Unmap(); !ip.IsUnspecified() {
			rec.o.remote = ip
		}
	}
	switch {
	case ctx.IsHead() || !bodyAllowed(rec.o.status) || resp.SkipBody:
		rec.o.bytes = 0
	case ctx.Hijacked():
		// The handler wrote the response to the connection itself, and may
		// say how: HijackedSent and HijackedHead.
		rec.o.bytes = -1
		if n, ok := ctx.UserValue(HijackedSent).(int64); ok {
			rec.o.bytes = n
		}
		if head, ok := ctx.UserValue(HijackedHead).(time.Time); ok {
			rec.o.dur = head.Sub(start)
		}
	case resp.IsBodyStream():
		if n := resp.Header.ContentLength(); n >= 0 {
			rec.o.bytes = int64(n)
		} else if c, ok := resp.BodyStream().(SentCounter); ok {
			rec.counted = true
			c.CountInto(&rec.sent)
		} else {
			rec.o.bytes = -1
		}
		return // Close finishes it
	default:
		rec.o.bytes = int64(len(resp.Body()))
	}
	ctx.RemoveUserValue(fastRecordKey{})
	rec.finish()
}

// Close is fasthttp's word that the response is over.
func (rec *fastRecord) Close() error {
	if rec.ctx != nil {
		if rec.counted {
			rec.o.bytes = rec.sent
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
