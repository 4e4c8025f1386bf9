package metrics

import (
	"bytes"
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// Siblings are the other worker processes of a server (prefork.Bus): the
// exposition any one of them answers includes every worker's series.
type Siblings interface {
	// Self is this worker's number and Workers how many there are.
	Self() int
	Workers() int
	// ServeMetrics sets what this worker answers a sibling's request with.
	ServeMetrics(gather func() []byte)
	// Metrics asks each worker in ask for its exposition, and returns those
	// that answered before ctx ended.
	Metrics(ctx context.Context, ask []int) map[int][]byte
}

// SiblingTimeout bounds how long a scrape waits for the other workers; one
// that has not answered by then (being replaced, say) is left out.
const SiblingTimeout = time.Second

// Workers makes the exposition the whole server's under --workers N: every
// series of every worker, each labelled worker="N" (sum by the other
// labels for the server's total). A worker that does not answer within
// SiblingTimeout is left out of that scrape.
func Workers(s Siblings) Option {
	return func(c *config) {
		own := c.reg
		s.ServeMetrics(func() []byte {
			fams, _ := own.Gather()
			var b bytes.Buffer
			enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeProtoDelim))
			for _, f := range fams {
				enc.Encode(f)
			}
			return b.Bytes()
		})
		c.gather = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
			fams, err := own.Gather()
			all := map[string]*dto.MetricFamily{}
			var order []string
			add := func(worker int, fs []*dto.MetricFamily) {
				label := strconv.Itoa(worker)
				for _, f := range fs {
					into := all[f.GetName()]
					if into == nil {
						into = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit}
						all[f.GetName()] = into
						order = append(order, f.GetName())
					}
					for _, m := range f.Metric {
						m.Label = append(m.Label, &dto.LabelPair{Name: proto.String("worker"), Value: proto.String(label)})
						into.Metric = append(into.Metric, m)
					}
				}
			}
			add(s.Self(), fams)
			var others []int
			for i := range s.Workers() {
				if i != s.Self() {
					others = append(others, i)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), SiblingTimeout)
			defer cancel()
			for i, ex := range s.Metrics(ctx, others) {
				add(i, decode(ex))
			}
			out := make([]*dto.MetricFamily, 0, len(order))
			for _, name := range order {
				out = append(out, all[name])
			}
			return out, err
		})
	}
}

// decode reads an exposition in delimited protocol buffers.
func decode(ex []byte) []*dto.MetricFamily {
	dec := expfmt.NewDecoder(bytes.NewReader(ex), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var fams []*dto.MetricFamily
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err != nil {
			return fams // at its end, or what arrived whole
		}
		fams = append(fams, &f)
	}
}
