package host

import (
	"os"

	"github.com/m0serve/m0/metrics"
	"github.com/m0serve/m0/middleware"
	"github.com/m0serve/m0/prefork"
	"github.com/m0serve/m0/realtime"
	"github.com/m0serve/m0/static"
)

// wrapLoop puts what the flags ask for around a loop's handler, whatever the
// application: the static directories in front of it, the first named
// outermost (a miss falls through to the next, then to the application),
// then the health path, the metrics and the access log. Under --workers N
// the metrics are the whole server's, asked of the siblings.
func wrapLoop(l *Loop, c *Config, hub *realtime.Hub, siblings *prefork.Bus) (*Loop, error) {
	var headers []static.Header
	for _, v := range c.StaticHeaders {
		hd, err := static.ParseHeader(v)
		if err != nil {
			return nil, &UsageError{Msg: "--static-header: " + err.Error()}
		}
		headers = append(headers, hd)
	}
	h := l.Handler
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
		if siblings != nil {
			opts = append(opts, metrics.Workers(siblings))
		}
		h = metrics.Middleware(metrics.Path, opts...)(h)
	}
	if c.AccessLog {
		h = middleware.AccessLog(os.Stdout)(h)
	}
	w := *l
	w.Handler = h
	return &w, nil
}
