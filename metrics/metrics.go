// Package metrics is middleware that measures every response of the
// handler it wraps and serves the Prometheus text exposition, as m0serve
// --metrics does.
package metrics

import (
	"github.com/m0serve/m0/internal/wire"
	"net/http"
	"strconv"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// Path is where m0serve --metrics serves the exposition.
const Path = observe.MetricsPath

// LatencyBuckets are the upper bounds, in seconds, of the request latency
// histogram: 100µs to 10s.
var LatencyBuckets = []float64{
	0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05,
	0.1, 0.25, 0.5,
	1, 2.5, 5, 10,
}

// Middleware returns middleware that serves with the handler it wraps and
// measures every response, and answers GET and HEAD on path (Path when
// empty) in Go with the Prometheus text exposition of:
//
//   - m0_http_request_duration_seconds, a histogram with labels method and
//     code over LatencyBuckets: from the request's headers to its response's
//     head, as the access log's dur_us;
//   - m0_http_requests_in_flight, a gauge of requests whose response has
//     not ended, streamed bodies included;
//   - m0_http_response_bytes_total, a counter with labels method and code of
//     the body bytes sent (a body whose length cannot be known adds nothing);
//   - the Go runtime's go_* and the process's process_* metrics.
//
// Each option adds metrics of its own: Realtime, a hub's.
//
// method is the request's method when it is one of RFC 9110's and PATCH,
// and OTHER for any other. Requests for path are not measured. Each call
// has its own registry, which every handler it wraps shares.
//
// Around an [middleware.FastHandler], the handler returned is one too.
func Middleware(path string, opts ...Option) func(http.Handler) http.Handler {
	if path == "" {
		path = Path
	}
	reg := prometheus.NewRegistry()
	m := metrics{
		path: path,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "m0_http_request_duration_seconds",
			Help:    "Time from a request's headers to its response's head, in seconds.",
			Buckets: LatencyBuckets,
		}, []string{"method", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "m0_http_requests_in_flight",
			Help: "Requests whose response has not ended, streamed bodies included.",
		}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "m0_http_response_bytes_total",
			Help: "Response body bytes sent.",
		}, []string{"method", "code"}),
	}
	reg.MustRegister(
		m.duration, m.inFlight, m.sent,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	cfg := config{reg: reg, gather: reg}
	for _, o := range opts {
		o(&cfg)
	}
	if len(cfg.server) > 0 {
		whole := prometheus.NewRegistry()
		whole.MustRegister(cfg.server...)
		cfg.gather = prometheus.Gatherers{cfg.gather, whole}
	}
	m.exposition = promhttp.HandlerFor(cfg.gather, promhttp.HandlerOpts{})
	fastExposition := fasthttpadaptor.NewFastHTTPHandler(m.exposition)
	return func(next http.Handler) http.Handler {
		h := m
		h.next = next
		if fh, ok := next.(middleware.FastHandler); ok {
			return &fastMetrics{metrics: &h, fast: fh, exposition: fastExposition}
		}
		return &h
	}
}

type metrics struct {
	path       string
	next       http.Handler
	duration   *prometheus.HistogramVec
	inFlight   prometheus.Gauge
	sent       *prometheus.CounterVec
	exposition http.Handler
}

func (m *metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == m.path && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		m.exposition.ServeHTTP(w, r)
		return
	}
	m.inFlight.Inc()
	defer m.inFlight.Dec()
	rec := observe.Observe(w, r, m.next)
	m.record(r.Method, rec.Outcome(r))
}

func (m *metrics) record(method string, o observe.Outcome) {
	method, code := methodLabel(method), codeLabel(o.Status)
	m.duration.WithLabelValues(method, code).Observe(o.Dur.Seconds())
	if o.Bytes > 0 {
		m.sent.WithLabelValues(method, code).Add(float64(o.Bytes))
	}
}

// Refused counts a response the server gave before the handler was reached.
func (m *metrics) Refused(method, path string, o observe.Outcome) {
	m.record(method, o)
	observe.PassRefused(m.next, method, path, o)
}

type fastMetrics struct {
	*metrics
	fast       middleware.FastHandler
	exposition fasthttp.RequestHandler
}

func (m *fastMetrics) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	if wire.PathIs(ctx, m.path) && (ctx.IsGet() || ctx.IsHead()) {
		m.exposition(ctx)
		return
	}
	m.inFlight.Inc()
	observe.ObserveFast(ctx, m.fast.ServeFastHTTP, func(ctx *fasthttp.RequestCtx, o observe.Outcome) {
		m.inFlight.Dec()
		m.record(string(ctx.Method()), o)
	})
}

// methodLabel bounds the method label to the known methods.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// codeLabel is the status as the code label writes it.
func codeLabel(status int) string {
	switch status {
	case http.StatusOK:
		return "200"
	case http.StatusNotFound:
		return "404"
	}
	return strconv.Itoa(status)
}
