package middleware

import (
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/internal/wire"
	"github.com/m0serve/m0/internal/wsup"
	"github.com/valyala/fasthttp"
)

// Limiter bounds how many requests are in flight at once through the
// handlers it wraps (m0serve's --limit-concurrency, uvicorn's): past its
// bound the next request is answered 503 with Retry-After, in Go, before the
// application sees it. A request counts while its handler runs: a held
// stream (M0-Hold) counts only until it is held, and a WebSocket upgrade
// not at all, so that long-lived connections do not use up the bound; a
// response the application streams itself counts until it ends. One
// Limiter may wrap several handlers (a process's loops): they share its
// bound.
type Limiter struct {
	max      int64
	inFlight atomic.Int64
	refused  atomic.Uint64
	logf     func(format string, args ...any)
	once     sync.Once
}

// NewLimiter returns a Limiter of n requests in flight (n > 0). logf, if
// not nil, is told of the first refusal, once.
func NewLimiter(n int, logf func(format string, args ...any)) *Limiter {
	return &Limiter{max: int64(max(n, 1)), logf: logf}
}

// InFlight is how many requests are in flight through the Limiter now.
func (l *Limiter) InFlight() int64 { return l.inFlight.Load() }

// Refused is how many requests it has answered 503.
func (l *Limiter) Refused() uint64 { return l.refused.Load() }

// Wrap returns next behind the Limiter. Around a [FastHandler], the
// handler returned is one too.
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	h := &limited{l: l, next: next}
	if fh, ok := next.(FastHandler); ok {
		return &fastLimited{limited: h, fast: fh}
	}
	return h
}

// enter counts a request in, or refuses it.
func (l *Limiter) enter() bool {
	if l.inFlight.Add(1) <= l.max {
		return true
	}
	l.inFlight.Add(-1)
	l.refused.Add(1)
	l.once.Do(func() {
		if l.logf != nil {
			l.logf("m0serve: refused a request with 503: %d requests in flight (--limit-concurrency %d); "+
				"the refusals are counted in m0_requests_refused_total{reason=\"limit-concurrency\"} under --metrics", l.max, l.max)
		}
	})
	return false
}

func (l *Limiter) leave() { l.inFlight.Add(-1) }

type limited struct {
	l    *Limiter
	next http.Handler
}

func (h *limited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if wsup.IsNetUpgrade(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	if !h.l.enter() {
		wire.Error(w, http.StatusServiceUnavailable, false)
		return
	}
	defer h.l.leave()
	h.next.ServeHTTP(w, r)
}

// Refused passes on the news of a request the server refused.
func (h *limited) Refused(method, path string, o observe.Outcome) {
	observe.PassRefused(h.next, method, path, o)
}

type fastLimited struct {
	*limited
	fast FastHandler
}

func (h *fastLimited) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	if wsup.IsFastUpgrade(ctx) {
		h.fast.ServeFastHTTP(ctx)
		return
	}
	if !h.l.enter() {
		wire.FastError(ctx, fasthttp.StatusServiceUnavailable, false)
		return
	}
	// Out when the response is over: a streamed body's end, which comes
	// after the handler returns (a held stream's, at once).
	observe.ObserveFast(ctx, h.fast.ServeFastHTTP, func(*fasthttp.RequestCtx, observe.Outcome) { h.l.leave() })
}
