package host

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/middleware"
	"github.com/m0serve/m0/prefork"
	"github.com/valyala/fasthttp"
)

// Recycling: a worker is replaced (prefork.Replacement) once it has served
// --max-requests (plus a jitter of up to --max-requests-jitter, drawn once
// per worker, so that workers started together are not replaced
// together), once its memory passes --workers-max-rss, or once it has
// served for --workers-lifetime. Any of them runs the server under a
// supervisor, with one worker or more: the supervisor replaces it.

// recycling reports whether the configuration replaces workers as they
// age.
func (c *Config) recycling() bool {
	return c.MaxRequests > 0 || c.WorkersMaxRSS > 0 || c.WorkersLifetime > 0
}

// requestLimit is the number of requests this worker serves before it asks
// to be replaced: --max-requests plus its jitter; 0 for no limit.
func (c *Config) requestLimit() int64 {
	if c.MaxRequests <= 0 {
		return 0
	}
	n := int64(c.MaxRequests)
	if c.MaxRequestsJitter > 0 {
		n += rand.Int64N(int64(c.MaxRequestsJitter) + 1)
	}
	return n
}

// counter counts the requests of every loop of a worker and calls due
// once, when the count reaches limit.
type counter struct {
	n     atomic.Int64
	limit int64
	once  sync.Once
	due   func(n int64)
}

func newCounter(limit int64, due func(n int64)) *counter { return &counter{limit: limit, due: due} }

func (c *counter) count() {
	if c.n.Add(1) == c.limit {
		c.once.Do(func() { c.due(c.limit) })
	}
}

// wrap returns h counted; it serves fasthttp when h does.
func (c *counter) wrap(h http.Handler) http.Handler {
	ch := &counted{counter: c, next: h}
	if fh, ok := h.(middleware.FastHandler); ok {
		return &fastCounter{counted: ch, fast: fh}
	}
	return ch
}

type counted struct {
	*counter
	next http.Handler
}

func (c *counted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.count()
	c.next.ServeHTTP(w, r)
}

// Refused passes on the news of a request the server refused.
func (c *counted) Refused(method, path string, o observe.Outcome) {
	observe.PassRefused(c.next, method, path, o)
}

type fastCounter struct {
	*counted
	fast middleware.FastHandler
}

func (c *fastCounter) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	c.count()
	c.fast.ServeFastHTTP(ctx)
}

// dueLine is what a worker that has served its requests says it is due
// for.
func dueLine(n int64) string { return fmt.Sprintf("it has served %d requests (--max-requests)", n) }

// stuckPool is what a worker does when every Python thread of its pool has
// run one request past --timeout at once: under a supervisor it asks to be
// replaced (its requests still running are cut at the drain's bound); a
// single process says that it cannot be.
func stuckPool(c *Config, w *prefork.Worker, stderr io.Writer) func() {
	if c.Timeout <= 0 {
		return nil
	}
	if w != nil && w.Supervised() {
		return func() {
			w.Due("timeout", fmt.Sprintf("every Python thread has run one request for more than %s (--timeout)", c.Timeout))
		}
	}
	return func() {
		fmt.Fprintf(stderr, "m0serve: every Python thread has run one request for more than %s (--timeout); "+
			"a single process cannot replace itself: run with --workers 1 or more for a supervisor that replaces it\n", c.Timeout)
	}
}
