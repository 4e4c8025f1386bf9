package metrics

import (
	"github.com/m0serve/m0/realtime"
	"github.com/prometheus/client_golang/prometheus"
)

// Option adds to what Middleware measures.
type Option func(*config)

// config is what the options set: the registry's collectors, and the
// gatherer the exposition serves.
type config struct {
	reg    *prometheus.Registry
	gather prometheus.Gatherer
	server []prometheus.Collector // the whole server's, gathered once, unlabelled
}

// Realtime adds the counts of a realtime hub, read from Hub.Stats at each
// scrape:
//
//   - m0_realtime_held, a gauge of the connections held now, with label
//     kind: sse or websocket;
//   - m0_realtime_frames_published_total, frames published in this process;
//   - m0_realtime_frames_replayed_total, frames sent to reconnecting
//     clients from the journal;
//   - m0_realtime_gaps_total, m0-gap events sent;
//   - m0_realtime_slow_subscribers_total, subscribers dropped because they
//     fell a whole queue behind;
//   - m0_realtime_frames_refused_total, frames refused (a reserved or
//     empty channel name, or data over the frame cap);
//   - m0_realtime_journal_frames, a gauge of the frames journalled for
//     replay.
func Realtime(hub *realtime.Hub) Option {
	return func(c *config) {
		c.reg.MustRegister(&hubCollector{hub: hub})
	}
}

type hubCollector struct{ hub *realtime.Hub }

var (
	heldDesc      = prometheus.NewDesc("m0_realtime_held", "Connections held now, by kind.", []string{"kind"}, nil)
	publishedDesc = prometheus.NewDesc("m0_realtime_frames_published_total", "Frames published in this process.", nil, nil)
	replayedDesc  = prometheus.NewDesc("m0_realtime_frames_replayed_total", "Frames sent to reconnecting clients from the journal.", nil, nil)
	gapsDesc      = prometheus.NewDesc("m0_realtime_gaps_total", "m0-gap events sent.", nil, nil)
	slowDesc      = prometheus.NewDesc("m0_realtime_slow_subscribers_total", "Subscribers dropped because their queue overflowed.", nil, nil)
	refusedDesc   = prometheus.NewDesc("m0_realtime_frames_refused_total", "Frames refused: a reserved or empty channel name, or data over the frame cap.", nil, nil)
	journalDesc   = prometheus.NewDesc("m0_realtime_journal_frames", "Frames journalled for Last-Event-ID replay.", nil, nil)
)

func (c *hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{heldDesc, publishedDesc, replayedDesc, gapsDesc, slowDesc, refusedDesc, journalDesc} {
		ch <- d
	}
}

func (c *hubCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.hub.Stats()
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(st.HeldStreams), "sse")
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(st.HeldWebSockets), "websocket")
	ch <- prometheus.MustNewConstMetric(publishedDesc, prometheus.CounterValue, float64(st.Published))
	ch <- prometheus.MustNewConstMetric(replayedDesc, prometheus.CounterValue, float64(st.Replayed))
	ch <- prometheus.MustNewConstMetric(gapsDesc, prometheus.CounterValue, float64(st.Gaps))
	ch <- prometheus.MustNewConstMetric(slowDesc, prometheus.CounterValue, float64(st.Slow))
	ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(st.Refused))
	ch <- prometheus.MustNewConstMetric(journalDesc, prometheus.GaugeValue, float64(st.JournalDepth))
}
