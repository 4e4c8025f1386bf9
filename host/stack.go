package host

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/metrics"
	"github.com/m0serve/m0/middleware"
	"github.com/m0serve/m0/prefork"
	"github.com/m0serve/m0/realtime"
	"github.com/m0serve/m0/static"
	"github.com/m0serve/m0/wsgi"
)

// wrapLoop puts what the flags ask for around a loop's handler, whatever the
// application: the static directories in front of it, the first named
// outermost (a miss falls through to the next, then to the application),
// then the health path, the metrics and the access log. Under --workers N
// the metrics are the whole server's, asked of the siblings.
func wrapLoop(l *Loop, c *Config, hub *realtime.Hub, siblings *prefork.Bus, load *procLoad) (*Loop, error) {
	var headers []static.Header
	for _, v := range c.StaticHeaders {
		hd, err := static.ParseHeader(v)
		if err != nil {
			return nil, &UsageError{Msg: "--static-header: " + err.Error()}
		}
		headers = append(headers, hd)
	}
	h := l.Handler
	if load.limiter != nil {
		h = load.limiter.Wrap(h)
	}
	load.loops = append(load.loops, l)
	dirs := c.StaticDirs()
	for i := len(dirs) - 1; i >= 0; i-- {
		s, err := static.New(dirs[i].Dir, &static.Options{Prefix: dirs[i].Prefix, CacheControl: c.StaticCacheControl,
			Headers: headers, Next: h})
		if err != nil {
			return nil, &refusal{Found: err.Error(), Fix: "name a directory this process can open"}
		}
		h = s
	}
	if c.HealthPath != "" {
		h = middleware.Health(c.HealthPath)(h)
	}
	if c.Metrics {
		var opts []metrics.Option
		if hub != nil {
			opts = append(opts, metrics.Realtime(hub))
		}
		opts = append(opts, metrics.Load(load.stats))
		if siblings != nil {
			opts = append(opts, metrics.Workers(siblings))
		}
		if load.page != nil {
			opts = append(opts, metrics.Replacements(load.page.Replacements))
		}
		h = metrics.Middleware(metrics.Path, opts...)(h)
	}
	if c.accessLogged() {
		log, err := middleware.AccessLogWith(os.Stdout, middleware.AccessLogOptions{Format: c.AccessLogFormat, Fields: c.AccessLogFields})
		if err != nil {
			return nil, &UsageError{Msg: err.Error()}
		}
		h = log(h)
	}
	w := *l
	w.Handler = h
	return &w, nil
}

// procLoad is what the loops of one process share of the load flags: one
// --limit-concurrency bound, and what --metrics reads of their pools and
// of the supervisor's count of replacements (page, under one).
type procLoad struct {
	limiter *middleware.Limiter
	loops   []*Loop
	page    *prefork.Page
}

func newLoad(c *Config, w *prefork.Worker, stderr io.Writer) *procLoad {
	load := &procLoad{}
	if c.LimitConcurrency > 0 {
		load.limiter = middleware.NewLimiter(c.LimitConcurrency, func(format string, args ...any) {
			fmt.Fprintf(stderr, format+"\n", args...)
		})
	}
	if w != nil && w.Listener != nil {
		load.page = w.Page
	}
	if c.Metrics {
		cpython.CountGILWaits(true)
	}
	return load
}

// stats sums the pools of the loops and reads the refusals.
func (p *procLoad) stats() metrics.LoadStats {
	var st metrics.LoadStats
	var timedOut, cutOff uint64
	p.pools(func(ps wsgi.PoolStats) {
		st.PoolThreads += ps.Threads
		st.PoolBusy += ps.Busy
		st.PoolWaiting += ps.Waiting
		st.PoolWaited += ps.Waited
		st.PoolWaitTime += ps.WaitTime
		timedOut += ps.TimedOut
		cutOff += ps.CutOff
	})
	st.GILWaitTime, st.GILTakes = cpython.GILWaits()
	st.Refused = map[string]uint64{"max-queue-wait": timedOut, "drain": cutOff}
	if p.limiter != nil {
		st.Refused["limit-concurrency"] = p.limiter.Refused()
	}
	return st
}

// pools calls fn with the counts of each pool of the loops (every drain
// with pool counts: the WSGI pool, a buffered ASGI handler's).
func (p *procLoad) pools(fn func(wsgi.PoolStats)) {
	drainsOf(p, func(s interface{ Stats() wsgi.PoolStats }) { fn(s.Stats()) })
}

// loopClock is an ASGI handler whose event loops' threads count their CPU
// time, and their time in the inline front end's network calls
// (asgi.Handler).
type loopClock interface {
	LoopCPU() time.Duration
	LoopNetwork() time.Duration
}

// drainsOf calls fn with each drain of p's loops that is a T.
func drainsOf[T any](p *procLoad, fn func(T)) {
	for _, l := range p.loops {
		for _, d := range l.Drain {
			if v, ok := d.(T); ok {
				fn(v)
			}
		}
	}
}

// accessLogged is whether responses are logged: --access-log, or a format
// given.
func (c *Config) accessLogged() bool { return c.AccessLog || c.AccessLogFormat != "" }
