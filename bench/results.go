package main

// The results a run writes, one JSON file per suite in
// bench/results/DATE/SUITE.json, and what the page is rendered from.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// A Report is one suite's run: what was measured, on what, and how.
type Report struct {
	Suite    string            `json:"suite"`
	Title    string            `json:"title"`
	About    string            `json:"about"`
	Date     string            `json:"date"`    // RFC 3339, UTC, when the suite started
	Commit   string            `json:"commit"`  // m0's commit, "+dirty" when the tree had changes outside bench/results
	Machine  Machine           `json:"machine"` // where it ran
	Versions map[string]string `json:"versions"`
	Method   Method            `json:"method"`
	Servers  []ServerInfo      `json:"servers"` // in table order
	Apps     []AppInfo         `json:"apps"`
	Runs     []Run             `json:"runs"`
	Memory   []Memory          `json:"memory,omitempty"`
	Ratios   []Ratio           `json:"ratios,omitempty"` // interleaved suites: m0's rows against each peer, round by round
	Targets  []Target          `json:"targets,omitempty"`
	Notes    []string          `json:"notes,omitempty"`
	Quick    bool              `json:"quick,omitempty"` // a smoke run: correctness, not speed
}

// Machine is what the figures were measured on.
type Machine struct {
	CPUs     int    `json:"cpus"`
	Model    string `json:"model"`
	Kernel   string `json:"kernel"`
	MemGiB   int    `json:"mem_gib"`
	BusyIdle string `json:"busy_before,omitempty"` // the CPUs' load before the first run
}

// Method is how each figure was taken.
type Method struct {
	Tool        string  `json:"tool"` // wrk, wsload, holds
	DurationS   float64 `json:"duration_s"`
	WarmupS     float64 `json:"warmup_s"`
	ServerCPU   string  `json:"server_cpu"` // taskset list; "" when not pinned
	ClientCPU   string  `json:"client_cpu"`
	Threads     int     `json:"client_threads"`
	TimeoutS    float64 `json:"timeout_s,omitempty"`
	Rate        int     `json:"rate,omitempty"`   // fan-out: frames published per second
	Runs        int     `json:"runs,omitempty"`   // sequential: loads in a row per figure, the median reported (0: one)
	Rounds      int     `json:"rounds,omitempty"` // interleaved: rounds per figure, each loading every server in turn (0: not interleaved)
	Description string  `json:"description"`
}

// ServerInfo is one row kind of the suite's table.
type ServerInfo struct {
	Key   string `json:"key"`
	Label string `json:"label"`
	Peer  bool   `json:"peer"` // false: m0 itself (or a baseline of m0's own)
	Base  bool   `json:"baseline,omitempty"`
	Group string `json:"group,omitempty"`
	// InProcess: the application called in a loop in one Python process,
	// no server (Server.InProcess); its runs have a rate and CPU, no latency.
	InProcess bool `json:"in_process,omitempty"`
}

// AppInfo names what was served.
type AppInfo struct {
	Name  string `json:"name"`
	About string `json:"about"`
}

// A Run is one server, one application, one concurrency.
type Run struct {
	App         string    `json:"app"`
	Server      string    `json:"server"`
	Concurrency int       `json:"concurrency"`
	Command     string    `json:"command,omitempty"`
	Failed      string    `json:"failed,omitempty"` // why there are no figures
	Requests    int64     `json:"requests"`         // requests (or messages, or frames) measured
	RPS         float64   `json:"rps"`
	Rates       []float64 `json:"rates,omitempty"`      // every try's (round's) rate, in order, when there were several (RPS is their median's)
	Interleave  string    `json:"interleave,omitempty"` // the interleaved rounds it was measured in (when they began); runs sharing it share rounds: Rates[i] of each is round i ("": sequential)
	P50ms       float64   `json:"p50_ms"`
	P90ms       float64   `json:"p90_ms"`
	P99ms       float64   `json:"p99_ms"`
	Maxms       float64   `json:"max_ms"`
	TransferMiB float64   `json:"transfer_mib_s,omitempty"`
	Errors      Errors    `json:"errors"`
	CPUSeconds  float64   `json:"server_cpu_s"`                         // user+system of the server's processes over the run
	CPUusPerReq float64   `json:"server_cpu_us_per_req,omitempty"`      // server CPU µs per request: the median over the tries (0: not recorded; older results: CPUSeconds / Requests)
	CPUPerReq   []float64 `json:"server_cpu_us_per_req_each,omitempty"` // each try's, in order, when there were several
	RSSBeforeKB int64     `json:"rss_before_kib"`                       // the server's RSS just before the run
	RSSPeakKB   int64     `json:"rss_peak_kib"`                         // the highest sampled during it
	ClientCPUS  float64   `json:"client_cpu_s,omitempty"`               // user+system of the load tool over the run
	Lost        int64     `json:"lost,omitempty"`                       // fan-out: deliveries expected and not received
	Raw         string    `json:"raw,omitempty"`                        // the load tool's own output
}

// A Ratio is one of m0's rows against a peer (or baseline) measured in the
// same interleaved rounds: their rates' ratio within each round, and the
// median of those.
type Ratio struct {
	App         string    `json:"app"`
	Concurrency int       `json:"concurrency"`
	Server      string    `json:"server"` // m0's row
	Versus      string    `json:"versus"`
	Median      float64   `json:"median"`
	Rounds      []float64 `json:"rounds"` // Server's rate / Versus's, round by round
}

// Memory is what idle connections (held SSE streams) cost a server: its
// RSS settled before and after they were opened.
type Memory struct {
	App        string   `json:"app"`
	Server     string   `json:"server"`
	Conns      int      `json:"connections"`
	Open       int      `json:"open"` // still open when the RSS was read
	RSSIdleKiB int64    `json:"rss_idle_kib"`
	RSSHeldKiB int64    `json:"rss_held_kib"`
	PerConnKiB *float64 `json:"per_conn_kib,omitempty"` // (held - idle) / open
	Note       string   `json:"note,omitempty"`
}

// Errors are what the load tool counted as failures.
type Errors struct {
	Connect int64 `json:"connect"`
	Read    int64 `json:"read"`
	Write   int64 `json:"write"`
	Timeout int64 `json:"timeout"`
	Status  int64 `json:"non_2xx"`
}

// Total is every failure counted.
func (e Errors) Total() int64 { return e.Connect + e.Read + e.Write + e.Timeout + e.Status }

func (e Errors) String() string {
	var parts []string
	for _, p := range []struct {
		name string
		n    int64
	}{{"connect", e.Connect}, {"read", e.Read}, {"write", e.Write}, {"timeout", e.Timeout}, {"non-2xx", e.Status}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", p.name, p.n))
		}
	}
	return strings.Join(parts, ", ")
}

// CPUPerRequest is the server's CPU time per request in µs: the median
// over the tries where recorded, else the run's CPU over its requests; 0
// when not measured.
func (r Run) CPUPerRequest() float64 {
	if r.CPUusPerReq > 0 {
		return r.CPUusPerReq
	}
	return cpuPerRequest(r.CPUSeconds, r.Requests)
}

func writeReport(dir string, r *Report) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.Suite+".json")
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// readReports reads every SUITE.json of a results directory, in the
// suites' order.
func readReports(dir string) ([]*Report, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var rs []*Report
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r Report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		rs = append(rs, &r)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("no SUITE.json in %s", dir)
	}
	order := suiteOrder()
	sort.SliceStable(rs, func(i, j int) bool {
		return slices.Index(order, rs[i].Suite) < slices.Index(order, rs[j].Suite)
	})
	return rs, nil
}

// latestResults is the newest dated directory under bench/results.
func latestResults(root string) (string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return "", err
	}
	var dates []string
	for _, e := range entries {
		if e.IsDir() && isDated(e.Name()) {
			dates = append(dates, e.Name())
		}
	}
	if len(dates) == 0 {
		return "", fmt.Errorf("no dated results directory under %s (run bench/run all first)", root)
	}
	sort.Strings(dates)
	return filepath.Join(root, dates[len(dates)-1]), nil
}

func isDated(dir string) bool {
	n := filepath.Base(dir)
	return len(n) == len("2006-01-02") && n[4] == '-' && n[7] == '-'
}

// newestPerSuite is, for each suite, its report in the newest dated
// directory under root that has one.
func newestPerSuite(root string) ([]*Report, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var dates []string
	for _, e := range entries {
		if e.IsDir() && isDated(e.Name()) {
			dates = append(dates, e.Name())
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dates)))
	seen := map[string]bool{}
	var out []*Report
	for _, d := range dates {
		rs, err := readReports(filepath.Join(root, d))
		if err != nil {
			continue
		}
		for _, r := range rs {
			if !seen[r.Suite] {
				seen[r.Suite] = true
				out = append(out, r)
			}
		}
	}
	return out, nil
}
