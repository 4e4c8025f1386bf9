package metrics

import (
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LoadStats are what Load reads at each scrape: a process's pool of Python
// threads, its waits for the GIL, and the requests it refused.
type LoadStats struct {
	PoolThreads  int           // Python threads of the WSGI pool; 0 for none
	PoolBusy     int           // of them running a request now
	PoolWaiting  int64         // requests waiting for one now
	PoolWaited   uint64        // requests that found none free and waited
	PoolWaitTime time.Duration // how long they waited, in all
	GILWaitTime  time.Duration // how long the server's threads waited for the GIL, in all
	GILTakes     uint64        // how many times they took it
	// Refused counts the requests answered 503 by the server itself, by
	// reason: "limit-concurrency", "max-queue-wait", "drain".
	Refused map[string]uint64
}

// Load adds a process's load, read from read at each scrape:
//
//   - m0_pool_threads and m0_pool_busy_threads, gauges of the WSGI pool's
//     Python threads and of those running a request;
//   - m0_pool_waiting_requests, a gauge of the requests waiting for one;
//   - m0_pool_waits_total and m0_pool_wait_seconds_total, counters of the
//     requests that found no thread free and of how long they waited;
//   - m0_gil_wait_seconds_total and m0_gil_takes_total, counters of how
//     long the server's threads waited for the GIL and how often they took
//     it (the mean wait is their ratio);
//   - m0_requests_refused_total, a counter with label reason of the
//     requests the server answered 503 itself.
func Load(read func() LoadStats) Option {
	return func(c *config) {
		c.reg.MustRegister(&loadCollector{read: read})
	}
}

type loadCollector struct{ read func() LoadStats }

var (
	poolThreadsDesc = prometheus.NewDesc("m0_pool_threads", "Python threads of the WSGI pool.", nil, nil)
	poolBusyDesc    = prometheus.NewDesc("m0_pool_busy_threads", "Python threads of the WSGI pool running a request now.", nil, nil)
	poolWaitingDesc = prometheus.NewDesc("m0_pool_waiting_requests", "Requests waiting for a Python thread now.", nil, nil)
	poolWaitsDesc   = prometheus.NewDesc("m0_pool_waits_total", "Requests that found no Python thread free and waited for one.", nil, nil)
	poolWaitDesc    = prometheus.NewDesc("m0_pool_wait_seconds_total", "Seconds requests waited for a Python thread, in all.", nil, nil)
	gilWaitDesc     = prometheus.NewDesc("m0_gil_wait_seconds_total", "Seconds the server's threads waited for the GIL, in all.", nil, nil)
	gilTakesDesc    = prometheus.NewDesc("m0_gil_takes_total", "Times the server's threads took the GIL.", nil, nil)
	refusedReqDesc  = prometheus.NewDesc("m0_requests_refused_total", "Requests the server answered 503 itself, by reason.", []string{"reason"}, nil)
)

// RefusalReasons are the reasons m0_requests_refused_total is labelled
// with, each exported from the start at zero.
var RefusalReasons = []string{"limit-concurrency", "max-queue-wait", "drain"}

func (c *loadCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolThreadsDesc, poolBusyDesc, poolWaitingDesc, poolWaitsDesc, poolWaitDesc, gilWaitDesc, gilTakesDesc, refusedReqDesc} {
		ch <- d
	}
}

func (c *loadCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.read()
	ch <- prometheus.MustNewConstMetric(poolThreadsDesc, prometheus.GaugeValue, float64(st.PoolThreads))
	ch <- prometheus.MustNewConstMetric(poolBusyDesc, prometheus.GaugeValue, float64(st.PoolBusy))
	ch <- prometheus.MustNewConstMetric(poolWaitingDesc, prometheus.GaugeValue, float64(st.PoolWaiting))
	ch <- prometheus.MustNewConstMetric(poolWaitsDesc, prometheus.CounterValue, float64(st.PoolWaited))
	ch <- prometheus.MustNewConstMetric(poolWaitDesc, prometheus.CounterValue, st.PoolWaitTime.Seconds())
	ch <- prometheus.MustNewConstMetric(gilWaitDesc, prometheus.CounterValue, st.GILWaitTime.Seconds())
	ch <- prometheus.MustNewConstMetric(gilTakesDesc, prometheus.CounterValue, float64(st.GILTakes))
	for _, r := range RefusalReasons {
		ch <- prometheus.MustNewConstMetric(refusedReqDesc, prometheus.CounterValue, float64(st.Refused[r]), r)
	}
}

// Replacements adds, once for the whole server rather than per worker,
// m0_worker_replacements_total: a counter with label reason of the worker
// processes replaced, read from read at each scrape (m0serve's reasons are
// prefork.ReplacementReasons; every one read is exported, zeros included).
func Replacements(read func() map[string]uint64) Option {
	return func(c *config) {
		c.server = append(c.server, &replacementCollector{read: read})
	}
}

type replacementCollector struct{ read func() map[string]uint64 }

var replacementsDesc = prometheus.NewDesc("m0_worker_replacements_total", "Worker processes replaced, by reason.", []string{"reason"}, nil)

func (c *replacementCollector) Describe(ch chan<- *prometheus.Desc) { ch <- replacementsDesc }

func (c *replacementCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.read()
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		ch <- prometheus.MustNewConstMetric(replacementsDesc, prometheus.CounterValue, float64(counts[r]), r)
	}
}
