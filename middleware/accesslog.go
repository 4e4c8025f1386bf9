package middleware

import (
	"context"
	"io"
	"log/slog"
	"net/http"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// AccessLog returns middleware that serves with the handler it wraps and
// writes one JSON line per response to w:
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
// Around a [FastHandler], the handler returned is one too.
func AccessLog(w io.Writer) func(http.Handler) http.Handler { return accessLogJSON(w, nil) }

// accessLogJSON is AccessLog with the request's fields named in fields
// (AccessFields) added to each line.
func accessLogJSON(w io.Writer, fields []string) func(http.Handler) http.Handler {
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: utcMillis}))
	var extra []jsonField
	for _, f := range fields {
		extra = append(extra, jsonField{key: f, header: map[string]string{
			"user_agent": "User-Agent", "referer": "Referer", "request_id": "X-Request-ID"}[f]})
	}
	return func(next http.Handler) http.Handler {
		l := &accessLog{log: log, next: next, extra: extra}
		if fh, ok := next.(FastHandler); ok {
			return &fastAccessLog{accessLog: l, fast: fh}
		}
		return l
	}
}

// utcMillis writes the record's time in UTC with milliseconds.
func utcMillis(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.String(slog.TimeKey, a.Value.Time().UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	return a
}

type accessLog struct {
	log   *slog.Logger
	next  http.Handler
	extra []jsonField
}

// jsonField is a field of AccessLogOptions.Fields: its key, and the
// request header it is read from.
type jsonField struct{ key, header string }

func (l *accessLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := observe.Observe(w, r, l.next)
	var get func(string) string
	if len(l.extra) > 0 {
		get = r.Header.Get
	}
	l.write(r.Method, r.URL.Path, rec.Outcome(r), get)
}

func (l *accessLog) write(method, path string, o observe.Outcome, header func(string) string) {
	attrs := [...]slog.Attr{
		slog.String("method", method),
		slog.String("path", path),
		slog.Int("status", o.Status),
		slog.Int64("dur_us", o.Dur.Microseconds()),
		slog.Int64("bytes", o.Bytes),
		{}, {}, {}, {},
	}
	n := 5
	if o.Remote.IsValid() {
		attrs[n] = slog.String("remote_addr", o.Remote.String())
		n++
	}
	if header != nil {
		for _, f := range l.extra {
			if v := header(f.header); v != "" {
				attrs[n] = slog.String(f.key, v)
				n++
			}
		}
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "access", attrs[:n]...)
}

// Refused logs a response the server gave before the handler was reached.
func (l *accessLog) Refused(method, path string, o observe.Outcome) {
	l.write(method, path, o, nil)
	observe.PassRefused(l.next, method, path, o)
}

type fastAccessLog struct {
	*accessLog
	fast FastHandler
}

func (l *fastAccessLog) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	observe.ObserveFast(ctx, l.fast.ServeFastHTTP, func(ctx *fasthttp.RequestCtx, o observe.Outcome) {
		var get func(string) string
		if len(l.extra) > 0 {
			get = func(n string) string { return string(ctx.Request.Header.Peek(n)) }
		}
		l.write(string(ctx.Method()), wire.Path(ctx), o, get)
	})
}

// A fasthttp handler that writes its response to the connection itself
// (a hijack) tells the access log and the metrics what it sent through
// these user values: the body's bytes as an int64, and when the head went
// out as a time.Time.
const (
	HijackedSent = wire.KeySent
	HijackedHead = wire.KeyHead
)
