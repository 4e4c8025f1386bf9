package middleware

import (
	"github.com/m0serve/m0/internal/wire"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/m0serve/m0/internal/observe"
	"github.com/valyala/fasthttp"
)

// started is when the process started serving, for uptime_s.
var started = time.Now()

// Health returns middleware that answers GET and HEAD on exactly path with
// a liveness JSON, in Go, without calling the handler it wraps:
//
//	{"status":"ok","pid":4242,"uptime_s":12.345}
//
// uptime_s is the seconds since the process loaded this package, with
// milliseconds. The answer is 200 with Content-Type application/json and
// Cache-Control no-store. Every other request goes to the wrapped handler.
// An empty path answers nothing itself.
//
// Around a [FastHandler], the handler returned is one too.
func Health(path string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		h := &health{path: path, next: next}
		if fh, ok := next.(FastHandler); ok {
			return &fastHealth{health: h, fast: fh}
		}
		return h
	}
}

type health struct {
	path string
	next http.Handler
}

// healthBody is the liveness JSON, made per answer for its uptime.
func healthBody() []byte {
	b := make([]byte, 0, 64)
	b = append(b, `{"status":"ok","pid":`...)
	b = strconv.AppendInt(b, int64(os.Getpid()), 10)
	b = append(b, `,"uptime_s":`...)
	b = strconv.AppendFloat(b, time.Since(started).Seconds(), 'f', 3, 64)
	return append(b, '}', '\n')
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.path == "" || r.URL.Path != h.path || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		h.next.ServeHTTP(w, r)
		return
	}
	body := healthBody()
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// Refused passes on the news of a request the server refused.
func (h *health) Refused(method, path string, o observe.Outcome) {
	observe.PassRefused(h.next, method, path, o)
}

type fastHealth struct {
	*health
	fast FastHandler
}

func (h *fastHealth) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	if h.path == "" || !wire.PathIs(ctx, h.path) || !(ctx.IsGet() || ctx.IsHead()) {
		h.fast.ServeFastHTTP(ctx)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	// fasthttp sends no body for a HEAD, and the length of the GET.
	ctx.SetBody(healthBody())
}
