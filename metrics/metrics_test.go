package metrics

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/observe/observetest"
	"github.com/m0serve/m0/middleware"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape gets the exposition at url and parses it.
func scrape(t *testing.T, url string) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("scrape does not parse: %v\n%s", err, text)
	}
	return text, fams
}

// sample finds the metric of fam whose labels are all of want.
func sample(fam *dto.MetricFamily, want map[string]string) *dto.Metric {
	if fam == nil {
		return nil
	}
next:
	for _, m := range fam.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func TestMetrics(t *testing.T) {
	requests := []struct {
		method, path string
	}{
		{"GET", "/buf"}, {"GET", "/buf"}, {"GET", "/buf"},
		{"GET", "/stream"}, {"GET", "/sized"},
		{"HEAD", "/buf"},
		{"BREW", "/buf"},
		{"GET", "/empty"},
	}
	type want struct {
		labels map[string]string
		count  uint64
		bytes  float64
	}
	wants := []want{
		{map[string]string{"method": "GET", "code": "200"}, 5, 3*float64(len(observetest.BufBody)) + 2*observetest.StreamN*float64(len(observetest.StreamPart))},
		{map[string]string{"method": "HEAD", "code": "200"}, 1, 0},
		{map[string]string{"method": "OTHER", "code": "200"}, 1, float64(len(observetest.BufBody))},
		{map[string]string{"method": "GET", "code": "204"}, 1, 0},
	}
	observetest.Modes(t, func(h http.Handler) http.Handler { return Middleware("")(h) }, func(t *testing.T, base string, d *observetest.Double) {
		for _, r := range requests {
			observetest.Get(t, r.method, base+r.path)
		}
		var text []byte
		var fams map[string]*dto.MetricFamily
		// A streamed response is measured when its body ends, which the
		// server may finish after the client has read it.
		for deadline := time.Now().Add(5 * time.Second); ; {
			text, fams = scrape(t, base+Path)
			if g := fams["m0_http_requests_in_flight"]; g != nil && g.Metric[0].GetGauge().GetValue() == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case p := <-d.Calls:
			for len(d.Calls) > 0 {
				p = <-d.Calls
			}
			if p == Path {
				t.Errorf("the scrape reached the application")
			}
		default:
		}
		t.Run("histogram", func(t *testing.T) {
			fam := fams["m0_http_request_duration_seconds"]
			if fam.GetType() != dto.MetricType_HISTOGRAM {
				t.Fatalf("m0_http_request_duration_seconds is %v", fam.GetType())
			}
			var total uint64
			for _, m := range fam.Metric {
				total += m.GetHistogram().GetSampleCount()
			}
			if total != uint64(len(requests)) {
				t.Errorf("%d requests observed, want %d (the scrapes not among them)", total, len(requests))
			}
			for _, w := range wants {
				m := sample(fam, w.labels)
				if m == nil {
					t.Errorf("no histogram for %v", w.labels)
					continue
				}
				h := m.GetHistogram()
				if h.GetSampleCount() != w.count {
					t.Errorf("%v: %d observations, want %d", w.labels, h.GetSampleCount(), w.count)
				}
				// The parser adds the +Inf bucket.
				if b := h.GetBucket(); len(b) != len(LatencyBuckets)+1 || b[0].GetUpperBound() != 0.0001 || b[len(b)-2].GetUpperBound() != 10 {
					t.Errorf("%v: buckets %v", w.labels, b)
				}
			}
		})
		t.Run("bytes", func(t *testing.T) {
			fam := fams["m0_http_response_bytes_total"]
			for _, w := range wants {
				m := sample(fam, w.labels)
				got := 0.0
				if m != nil {
					got = m.GetCounter().GetValue()
				}
				if got != w.bytes {
					t.Errorf("%v: %v bytes, want %v", w.labels, got, w.bytes)
				}
			}
		})
		t.Run("collectors", func(t *testing.T) {
			for _, name := range []string{"m0_http_requests_in_flight", "go_goroutines", "process_resident_memory_bytes"} {
				if fams[name] == nil {
					t.Errorf("no %s", name)
				}
			}
		})
		t.Run("promtool", func(t *testing.T) {
			promtool, err := exec.LookPath("promtool")
			if err != nil {
				t.Skip("promtool is not installed (Debian package prometheus)")
			}
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = bytes.NewReader(text)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool check metrics: %v\n%s", err, out)
			}
		})
	})
}

// TestObserversTogether runs the access log and the metrics over one
// handler: under fasthttp they share one record of each request.
func TestObserversTogether(t *testing.T) {
	out := make(observetest.Lines, 10)
	h := middleware.AccessLog(out)(Middleware("")(middleware.Health("/health")(observetest.NewDouble()))).(middleware.FastHandler)
	base := observetest.ServeFast(t, h)
	for _, path := range []string{"/stream", "/health", Path} {
		observetest.Get(t, "GET", base+path)
		line := out.Next(t)
		want := map[string]string{"/stream": `"bytes":15,`, "/health": `"status":200,`, Path: `"status":200,`}[path]
		if !bytes.Contains([]byte(line), []byte(want)) {
			t.Errorf("%s: line %s, want %s", path, line, want)
		}
	}
	_, fams := scrape(t, base+Path)
	m := sample(fams["m0_http_request_duration_seconds"], map[string]string{"method": "GET", "code": "200"})
	if m.GetHistogram().GetSampleCount() != 2 {
		t.Errorf("%d observations, want 2 (/stream and /health)", m.GetHistogram().GetSampleCount())
	}
	if g := fams["m0_http_requests_in_flight"].Metric[0].GetGauge().GetValue(); g != 0 {
		t.Errorf("%v in flight", g)
	}
}
