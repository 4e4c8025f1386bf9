// Package fanout is the report of bench/holds, the SSE fan-out load: what
// it writes and what the harness reads.
package fanout

// Result is one server's run: one JSON line of the report's json block.
type Result struct {
	Server        string  `json:"server"`
	Version       string  `json:"version"`
	Command       string  `json:"command"`
	Streams       int     `json:"streams"`
	RSSIdleKiB    int64   `json:"rss_idle_kib"`
	RSSHeldKiB    int64   `json:"rss_held_kib"`
	RSSLoadKiB    int64   `json:"rss_load_kib"`
	PerStreamKiB  float64 `json:"per_stream_kib"`
	Published     int64   `json:"published"`
	PublishErrors int64   `json:"publish_errors"` // frames not sent: the server was behind
	Expected      int64   `json:"deliveries_expected"`
	Received      int64   `json:"deliveries_received"`
	Ended         int64   `json:"streams_ended"` // streams that ended before the tool closed them
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	P999ms        float64 `json:"p999_ms"`
	Maxms         float64 `json:"max_ms"`
	CPUPercent    float64 `json:"server_cpu_percent"`
	OpenSeconds   float64 `json:"open_seconds"`
}
