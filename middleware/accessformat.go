package middleware

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// AccessLogOptions say how AccessLogWith writes its lines.
type AccessLogOptions struct {
	// Format, when set, writes each line as text in gunicorn's
	// access-log format, its atoms written %(NAME)s (see AccessLogWith);
	// empty writes AccessLog's JSON lines.
	Format string
	// Fields adds to each JSON line the request's user_agent
	// (User-Agent), referer (Referer) and request_id (X-Request-ID), each
	// named here, when the request has it.
	Fields []string
}

// AccessFields are the JSON fields AccessLogOptions.Fields may name.
var AccessFields = []string{"user_agent", "referer", "request_id"}

// DefaultAccessFormat is gunicorn's default access-log format.
const DefaultAccessFormat = `%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"`

// AccessLogWith returns AccessLog's middleware, writing per opts. A Format
// is gunicorn's (--access-logformat), one line per response:
//
//	h remote address       l "-"                   u user (HTTP Basic) or "-"
//	t [02/Jan/2006:15:04:05 -0700], the time the request began
//	r request line         m method                U path     q query string
//	H protocol             s status                B body bytes
//	b body bytes, or "-" for none                  f Referer  a User-Agent
//	T seconds              M milliseconds          D microseconds
//	L seconds, decimal     p process id
//	{NAME}i a request header   {NAME}o a response header   {NAME}e an environment variable
//
// A value that is missing is "-". An unknown atom or Field is an error.
func AccessLogWith(w io.Writer, opts AccessLogOptions) (func(http.Handler) http.Handler, error) {
	for i, f := range opts.Fields {
		if !contains(AccessFields, f) {
			return nil, fmt.Errorf("access log: no field %q (the fields are %s)", f, strings.Join(AccessFields, ", "))
		}
		if contains(opts.Fields[:i], f) {
			return nil, fmt.Errorf("access log: the field %q is named twice", f)
		}
	}
	if opts.Format == "" {
		return accessLogJSON(w, opts.Fields), nil
	}
	parts, err := parseAccessFormat(opts.Format)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		l := &formatLog{w: w, parts: parts, next: next}
		if fh, ok := next.(FastHandler); ok {
			return &fastFormatLog{formatLog: l, fast: fh}
		}
		return l
	}, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// entry is what a formatted line is made of.
type entry struct {
	method, path, query, proto string
	o                          observe.Outcome
	began                      time.Time
	reqHeader, respHeader      func(name string) string // nil: none known (a refusal)
}

// atom writes one atom of an entry.
type atom func(b []byte, e *entry) []byte

// parseAccessFormat splits a gunicorn format into literal text and atoms.
func parseAccessFormat(format string) ([]atom, error) {
	var parts []atom
	lit := func(s string) {
		if s != "" {
			parts = append(parts, func(b []byte, _ *entry) []byte { return append(b, s...) })
		}
	}
	for {
		i := strings.Index(format, "%(")
		if i < 0 {
			lit(strings.ReplaceAll(format, "%%", "%"))
			return parts, nil
		}
		lit(strings.ReplaceAll(format[:i], "%%", "%"))
		rest := format[i+2:]
		j := strings.Index(rest, ")s")
		if j < 0 {
			return nil, fmt.Errorf("access log format: %q has %%( without )s", format[i:])
		}
		name := rest[:j]
		a, err := accessAtom(name)
		if err != nil {
			return nil, err
		}
		parts = append(parts, a)
		format = rest[j+2:]
	}
}

func dash(b []byte, s string) []byte {
	if s == "" {
		return append(b, '-')
	}
	return append(b, s...)
}

func accessAtom(name string) (atom, error) {
	if len(name) > 3 && name[0] == '{' && strings.Contains(name, "}") {
		key, kind := name[1:strings.LastIndex(name, "}")], name[strings.LastIndex(name, "}")+1:]
		switch kind {
		case "i":
			return func(b []byte, e *entry) []byte { return dash(b, header(e.reqHeader, key)) }, nil
		case "o":
			return func(b []byte, e *entry) []byte { return dash(b, header(e.respHeader, key)) }, nil
		case "e":
			v := os.Getenv(key)
			return func(b []byte, _ *entry) []byte { return dash(b, v) }, nil
		}
		return nil, fmt.Errorf("access log format: %%(%s)s: a {NAME} atom ends in i, o or e", name)
	}
	switch name {
	case "h":
		return func(b []byte, e *entry) []byte {
			if e.o.Remote.IsValid() {
				return e.o.Remote.AppendTo(b)
			}
			return append(b, '-')
		}, nil
	case "l":
		return func(b []byte, _ *entry) []byte { return append(b, '-') }, nil
	case "u":
		return func(b []byte, e *entry) []byte { return dash(b, basicUser(header(e.reqHeader, "Authorization"))) }, nil
	case "t":
		return func(b []byte, e *entry) []byte {
			return e.began.AppendFormat(append(b, '['), "02/Jan/2006:15:04:05 -0700]")
		}, nil
	case "r":
		return func(b []byte, e *entry) []byte {
			b = append(append(append(b, e.method...), ' '), e.path...)
			if e.query != "" {
				b = append(append(b, '?'), e.query...)
			}
			return append(append(b, ' '), e.proto...)
		}, nil
	case "m":
		return func(b []byte, e *entry) []byte { return append(b, e.method...) }, nil
	case "U":
		return func(b []byte, e *entry) []byte { return append(b, e.path...) }, nil
	case "q":
		return func(b []byte, e *entry) []byte { return append(b, e.query...) }, nil
	case "H":
		return func(b []byte, e *entry) []byte { return append(b, e.proto...) }, nil
	case "s":
		return func(b []byte, e *entry) []byte { return strconv.AppendInt(b, int64(e.o.Status), 10) }, nil
	case "B":
		return func(b []byte, e *entry) []byte { return strconv.AppendInt(b, max(e.o.Bytes, 0), 10) }, nil
	case "b":
		return func(b []byte, e *entry) []byte {
			if e.o.Bytes <= 0 {
				return append(b, '-')
			}
			return strconv.AppendInt(b, e.o.Bytes, 10)
		}, nil
	case "f":
		return func(b []byte, e *entry) []byte { return dash(b, header(e.reqHeader, "Referer")) }, nil
	case "a":
		return func(b []byte, e *entry) []byte { return dash(b, header(e.reqHeader, "User-Agent")) }, nil
	case "T":
		return func(b []byte, e *entry) []byte { return strconv.AppendInt(b, int64(e.o.Dur/time.Second), 10) }, nil
	case "M":
		return func(b []byte, e *entry) []byte { return strconv.AppendInt(b, e.o.Dur.Milliseconds(), 10) }, nil
	case "D":
		return func(b []byte, e *entry) []byte { return strconv.AppendInt(b, e.o.Dur.Microseconds(), 10) }, nil
	case "L":
		return func(b []byte, e *entry) []byte { return strconv.AppendFloat(b, e.o.Dur.Seconds(), 'f', 6, 64) }, nil
	case "p":
		pid := "<" + strconv.Itoa(os.Getpid()) + ">"
		return func(b []byte, _ *entry) []byte { return append(b, pid...) }, nil
	}
	return nil, fmt.Errorf("access log format: no atom %%(%s)s (gunicorn's: h l u t r m U q H s B b f a T M D L p, {NAME}i, {NAME}o, {NAME}e)", name)
}

func header(get func(string) string, name string) string {
	if get == nil {
		return ""
	}
	return get(name)
}

// basicUser is the user of an HTTP Basic Authorization, or "".
func basicUser(auth string) string {
	const prefix = "Basic "
	if len(auth) <= len(prefix) || !wire.EqualFold(auth[:len(prefix)], prefix) {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(auth[len(prefix):])
	if err != nil {
		return ""
	}
	user, _, _ := bytes.Cut(raw, []byte(":"))
	return string(user)
}

type formatLog struct {
	w     io.Writer
	parts []atom
	next  http.Handler
}

var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func (l *formatLog) write(e *entry) {
	bp := lineBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	for _, p := range l.parts {
		b = p(b, e)
	}
	b = append(b, '\n')
	l.w.Write(b)
	*bp = b
	lineBuffers.Put(bp)
}

func (l *formatLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	rec := observe.Observe(w, r, l.next)
	l.write(&entry{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, proto: r.Proto, o: rec.Outcome(r),
		began: began, reqHeader: r.Header.Get, respHeader: w.Header().Get})
}

// Refused logs a response the server gave before the handler was reached.
func (l *formatLog) Refused(method, path string, o observe.Outcome) {
	l.write(&entry{method: method, path: path, proto: "HTTP/1.1", o: o, began: time.Now().Add(-o.Dur)})
	observe.PassRefused(l.next, method, path, o)
}

type fastFormatLog struct {
	*formatLog
	fast FastHandler
}

func (l *fastFormatLog) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	began := time.Now()
	observe.ObserveFast(ctx, l.fast.ServeFastHTTP, func(ctx *fasthttp.RequestCtx, o observe.Outcome) {
		l.write(&entry{method: string(ctx.Method()), path: wire.Path(ctx), query: string(ctx.URI().QueryString()),
			proto: string(ctx.Request.Header.Protocol()), o: o, began: began,
			reqHeader:  func(n string) string { return string(ctx.Request.Header.Peek(n)) },
			respHeader: func(n string) string { return string(ctx.Response.Header.Peek(n)) }})
	})
}
