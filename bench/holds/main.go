// Command holds is the fan-out suite's load tool (bench/run fanout): it
// starts a server, holds many SSE streams on it spread over channels,
// publishes frames at a steady rate through the server's HTTP publish
// endpoint, and reports the server's memory per held stream (RSS growth
// over the streams) and the publish-to-receive latency measured at the
// clients, for m0serve and for Centrifugo (its uni_sse transport) in turn.
//
// Each frame's data carries the time it was sent ({"t":UNIX_NANOS}); a
// client that reads it subtracts that from its clock, the same clock, as
// the tool runs on the server's machine. Run it pinned to a core of its
// own (bench/run does: taskset -c 1); it pins each server to -server-cpu.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/m0serve/m0/bench/internal/fanout"
	"github.com/m0serve/m0/bench/internal/procfs"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.servers, "servers", "m0serve,centrifugo", "servers to measure, in order")
	flag.StringVar(&cfg.m0serve, "m0serve", "bench/.bin/m0serve", "the m0serve binary")
	flag.StringVar(&cfg.appDir, "app-dir", "bench/apps", "directory of realtime_bench.py")
	flag.StringVar(&cfg.centrifugo, "centrifugo", "bench/.bin/centrifugo", "the centrifugo binary")
	flag.IntVar(&cfg.streams, "streams", 10000, "SSE streams to hold")
	flag.IntVar(&cfg.channels, "channels", 100, "channels the streams are spread over")
	flag.IntVar(&cfg.rate, "rate", 1000, "frames published per second, over all channels")
	flag.DurationVar(&cfg.warmup, "warmup", 3*time.Second, "publishing before the measured window")
	flag.DurationVar(&cfg.duration, "duration", 20*time.Second, "the measured window")
	flag.StringVar(&cfg.serverCPU, "server-cpu", "0", "taskset CPU list for the server (empty: not pinned)")
	flag.StringVar(&cfg.workdir, "workdir", "", "directory for configs and logs (default: a temporary one)")
	flag.Parse()
	for _, p := range []*string{&cfg.m0serve, &cfg.appDir, &cfg.centrifugo} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			fatal(err)
		}
		*p = abs
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Max < uint64(cfg.streams+512) {
		fatal(fmt.Errorf("%d streams need %d open files or more; the hard limit is %d (raise it: ulimit -Hn)",
			cfg.streams, cfg.streams+512, lim.Max))
	}
	if cfg.workdir == "" {
		dir, err := os.MkdirTemp("", "holds-")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(dir)
		cfg.workdir = dir
	}
	var results []result
	for _, name := range strings.Split(cfg.servers, ",") {
		var t target
		switch name {
		case "m0serve":
			t = &m0target{bin: cfg.m0serve, appDir: cfg.appDir}
		case "centrifugo":
			t = &centrifugoTarget{bin: cfg.centrifugo}
		default:
			fatal(fmt.Errorf("unknown server %q (m0serve, centrifugo)", name))
		}
		r, err := run(&cfg, t)
		if err != nil {
			fatal(fmt.Errorf("%s: %w", name, err))
		}
		results = append(results, r)
	}
	report(os.Stdout, &cfg, results)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "holds:", err)
	os.Exit(1)
}

type config struct {
	servers, m0serve, appDir, centrifugo, serverCPU, workdir string
	streams, channels, rate                                  int
	warmup, duration                                         time.Duration
}

// A target is one server under test: how to start it, where its streams
// and its publish endpoint are.
type target interface {
	name() string
	version() string
	command(port int, dir string) ([]string, error)
	ready(c *http.Client, base string) error
	streamURL(base string, channel string) string
	publish(c *http.Client, base, channel string, data []byte) error
}

type result = fanout.Result

func channelName(i int) string { return "ch" + strconv.Itoa(i) }

func run(cfg *config, t target) (result, error) {
	r := result{Server: t.name(), Version: t.version(), Streams: cfg.streams}
	port, err := procfs.FreePort()
	if err != nil {
		return r, err
	}
	dir := filepath.Join(cfg.workdir, t.name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	argv, err := t.command(port, dir)
	if err != nil {
		return r, err
	}
	if cfg.serverCPU != "" {
		argv = append([]string{"taskset", "-c", cfg.serverCPU}, argv...)
	}
	r.Command = strings.Join(argv, " ")
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return r, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, dir
	fmt.Fprintf(os.Stderr, "==> %s: %s\n", t.name(), r.Command)
	if err := cmd.Start(); err != nil {
		return r, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	control := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err = t.ready(control, base); err == nil {
			break
		}
		select {
		case err := <-exited:
			return r, fmt.Errorf("the server exited (%v); its log is %s", err, logf.Name())
		default:
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("not ready after 30 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pid := cmd.Process.Pid
	settle()
	if r.RSSIdleKiB, err = procfs.RSS(pid); err != nil {
		return r, err
	}

	// Hold the streams, stream i on channel i mod channels.
	l := newListeners(cfg)
	t0 := time.Now()
	if err := l.open(t, base); err != nil {
		return r, err
	}
	r.OpenSeconds = time.Since(t0).Seconds()
	settle()
	if r.RSSHeldKiB, err = procfs.RSS(pid); err != nil {
		return r, err
	}
	r.PerStreamKiB = float64(r.RSSHeldKiB-r.RSSIdleKiB) / float64(cfg.streams)
	fmt.Fprintf(os.Stderr, "    %d streams held in %.1f s; RSS %d -> %d KiB (%.2f KiB each)\n",
		cfg.streams, r.OpenSeconds, r.RSSIdleKiB, r.RSSHeldKiB, r.PerStreamKiB)

	// Publish: warm-up, then the measured window.
	start := time.Now()
	l.window(start.Add(cfg.warmup), start.Add(cfg.warmup+cfg.duration))
	cpu0 := procfs.Ticks(pid, false)
	pub := publishFor(cfg, t, base, start.Add(cfg.warmup), start.Add(cfg.warmup+cfg.duration))
	cpu1 := procfs.Ticks(pid, false)
	r.CPUPercent = float64(cpu1-cpu0) / time.Since(start).Seconds() // ticks are 1/100 s: this is % of a core
	if r.RSSLoadKiB, err = procfs.RSS(pid); err != nil {
		return r, err
	}
	time.Sleep(2 * time.Second) // frames still on their way
	r.Published, r.PublishErrors = pub.inWindow.Load(), pub.errors.Load()
	for ch := range pub.perChannel {
		r.Expected += pub.perChannel[ch].Load() * int64(l.subscribers[ch])
	}
	lat := l.close()
	r.Received, r.Ended = int64(len(lat)), l.ended.Load()
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1000 }
		r.P50ms, r.P99ms, r.P999ms, r.Maxms = q(0.50), q(0.99), q(0.999), float64(lat[len(lat)-1])/1000
	}
	fmt.Fprintf(os.Stderr, "    published %d (%d errors), received %d of %d; p50 %.2f ms p99 %.2f ms; CPU %.0f%%\n",
		r.Published, r.PublishErrors, r.Received, r.Expected, r.P50ms, r.P99ms, r.CPUPercent)
	return r, nil
}

// settle lets a server's allocator and collector come to rest before its
// RSS is read.
func settle() { time.Sleep(3 * time.Second) }

// listeners are the held streams and what they read.
type listeners struct {
	cfg         *config
	subscribers []int // per channel
	client      *http.Client
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	from, until atomic.Int64 // the measured window, unix nanoseconds
	ended       atomic.Int64 // streams that ended before the tool closed them
	mu          sync.Mutex
	lat         []int32 // latencies in the window, µs
}

func newListeners(cfg *config) *listeners {
	l := &listeners{cfg: cfg, subscribers: make([]int, cfg.channels)}
	l.client = &http.Client{Transport: &http.Transport{
		DisableCompression: true, ResponseHeaderTimeout: 30 * time.Second,
	}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.until.Store(-1)
	return l
}

func (l *listeners) window(from, until time.Time) {
	l.from.Store(from.UnixNano())
	l.until.Store(until.UnixNano())
}

// open holds every stream, 200 opening at a time, and returns once each
// has read its first line (the server has it subscribed by then).
func (l *listeners) open(t target, base string) error {
	sem := make(chan struct{}, 200)
	errs := make(chan error, 1)
	var opening sync.WaitGroup
	for i := range l.cfg.streams {
		ch := i % l.cfg.channels
		l.subscribers[ch]++
		sem <- struct{}{}
		opening.Add(1)
		go func() {
			defer func() { <-sem }()
			if err := l.hold(t.streamURL(base, channelName(ch)), &opening); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
		select {
		case err := <-errs:
			return err
		default:
		}
	}
	opening.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// hold reads one stream until the tool closes it, noting the latency of
// each frame sent in the window; opened is marked done at its first line.
func (l *listeners) hold(u string, opened *sync.WaitGroup) error {
	req, _ := http.NewRequestWithContext(l.ctx, "GET", u, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := l.client.Do(req)
	if err != nil {
		opened.Done()
		return err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		opened.Done()
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer resp.Body.Close()
		br := bufio.NewReaderSize(resp.Body, 4096)
		first := true
		var mine []int32
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				if l.ctx.Err() == nil {
					l.ended.Add(1)
				}
				break
			}
			if first && len(bytes.TrimSpace(line)) > 0 {
				first = false
				opened.Done()
			}
			if sent, ok := sentAt(line); ok {
				now := time.Now().UnixNano()
				if sent >= l.from.Load() && sent < l.until.Load() {
					mine = append(mine, int32((now-sent)/1000))
				}
			}
		}
		if first {
			opened.Done()
		}
		l.mu.Lock()
		l.lat = append(l.lat, mine...)
		l.mu.Unlock()
	}()
	return nil
}

// sentAt finds the "t":NANOS a data line carries.
func sentAt(line []byte) (int64, bool) {
	if !bytes.HasPrefix(line, []byte("data:")) {
		return 0, false
	}
	i := bytes.Index(line, []byte(`"t":`))
	if i < 0 {
		return 0, false
	}
	var n int64
	j := i + 4
	for ; j < len(line) && '0' <= line[j] && line[j] <= '9'; j++ {
		n = n*10 + int64(line[j]-'0')
	}
	return n, j > i+4
}

// close ends every stream and returns the latencies read in the window.
func (l *listeners) close() []int32 {
	l.cancel()
	l.wg.Wait()
	return l.lat
}

type publishing struct {
	perChannel []atomic.Int64 // frames published in the window, per channel
	inWindow   atomic.Int64
	errors     atomic.Int64
}

// publishFor publishes cfg.rate frames a second, channel after channel,
// until until; what is sent in [from, until) is counted.
func publishFor(cfg *config, t target, base string, from, until time.Time) *publishing {
	p := &publishing{perChannel: make([]atomic.Int64, cfg.channels)}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	jobs := make(chan int, cfg.rate)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ch := range jobs {
				sent := time.Now()
				data := []byte(`{"t":` + strconv.FormatInt(sent.UnixNano(), 10) + `}`)
				if err := t.publish(c, base, channelName(ch), data); err != nil {
					p.errors.Add(1)
					continue
				}
				if !sent.Before(from) && sent.Before(until) {
					p.perChannel[ch].Add(1)
					p.inWindow.Add(1)
				}
			}
		}()
	}
	interval := time.Second / time.Duration(cfg.rate)
	next := time.Now()
	for i := 0; next.Before(until); i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		select {
		case jobs <- i % cfg.channels:
		default:
			p.errors.Add(1) // the server is behind: a frame the rate asked for is not sent
		}
		next = next.Add(interval)
	}
	close(jobs)
	wg.Wait()
	return p
}

// --- m0serve -----------------------------------------------------------------

type m0target struct{ bin, appDir string }

func (m *m0target) name() string { return "m0serve" }

// version is the commit of the checkout the tool runs in (m0serve is
// built from it by bench/run).
func (m *m0target) version() string {
	out, _ := exec.Command("git", "describe", "--always", "--dirty").Output()
	return "commit " + strings.TrimSpace(string(out))
}

func (m *m0target) command(port int, _ string) ([]string, error) {
	return []string{m.bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--realtime",
		"--app-dir", m.appDir, "realtime_bench:application"}, nil
}

func (m *m0target) ready(c *http.Client, base string) error {
	return m.publish(c, base, "warm", []byte("warm"))
}

func (m *m0target) streamURL(base, channel string) string { return base + "/events?c=" + channel }

func (m *m0target) publish(c *http.Client, base, channel string, data []byte) error {
	return post(c, base+"/publish?c="+channel, nil, data)
}

func post(c *http.Client, u string, header http.Header, body []byte) error {
	req, _ := http.NewRequest("POST", u, bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("POST %s: %s %s", u, resp.Status, b)
	}
	return nil
}

// --- Centrifugo ---------------------------------------------------------------

const (
	centrifugoSecret = "holds-bench-hmac-secret"
	centrifugoAPIKey = "holds-bench-api-key"
)

type centrifugoTarget struct{ bin string }

func (c *centrifugoTarget) name() string { return "centrifugo" }

func (c *centrifugoTarget) version() string {
	out, _ := exec.Command(c.bin, "version").Output()
	return strings.TrimSpace(string(out))
}

// command writes a configuration: the uni_sse transport, the HTTP API,
// HS256 connection tokens whose channels claim subscribes the connection,
// no history (plain fan-out), no connection limits, logs at warn, pings
// at their default (25 s).
func (c *centrifugoTarget) command(port int, dir string) ([]string, error) {
	conf := map[string]any{
		"http_server": map[string]any{"address": "127.0.0.1", "port": port},
		"log":         map[string]any{"level": "warn"},
		"client": map[string]any{
			"token": map[string]any{"hmac_secret_key": centrifugoSecret},
			// No limits on connections (0 is none).
			"connection_limit": 0, "user_connection_limit": 0, "connection_rate_limit": 0,
		},
		"channel": map[string]any{"without_namespace": map[string]any{
			"history_size": 0, "history_ttl": "0s", "force_recovery": false, "allow_recovery": false,
			"presence": false, "join_leave": false,
		}},
		"uni_sse":     map[string]any{"enabled": true},
		"http_api":    map[string]any{"key": centrifugoAPIKey},
		"usage_stats": map[string]any{"disabled": true},
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	return []string{c.bin, "--config", path}, nil
}

func (c *centrifugoTarget) ready(cl *http.Client, base string) error {
	return c.publish(cl, base, "warm", []byte(`{"t":0}`))
}

func (c *centrifugoTarget) streamURL(base, channel string) string {
	connect, _ := json.Marshal(map[string]string{"token": hs256(map[string]any{
		"sub": "bench", "channels": []string{channel}, "exp": time.Now().Add(24 * time.Hour).Unix(),
	})})
	return base + "/connection/uni_sse?cf_connect=" + url.QueryEscape(string(connect))
}

func (c *centrifugoTarget) publish(cl *http.Client, base, channel string, data []byte) error {
	body, _ := json.Marshal(map[string]any{"channel": channel, "data": json.RawMessage(data)})
	return post(cl, base+"/api/publish", http.Header{"X-Api-Key": {centrifugoAPIKey}, "Content-Type": {"application/json"}}, body)
}

// hs256 is a JSON Web Token of claims signed with the shared secret.
func hs256(claims map[string]any) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	body, _ := json.Marshal(claims)
	msg := head + "." + enc.EncodeToString(body)
	mac := hmac.New(sha256.New, []byte(centrifugoSecret))
	mac.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(mac.Sum(nil))
}

// --- the report -------------------------------------------------------------

func report(w io.Writer, cfg *config, rs []result) {
	pinning := "nothing pinned"
	if cfg.serverCPU != "" {
		pinning = "the server pinned to CPU " + cfg.serverCPU
	}
	fmt.Fprintf(w, "%d SSE streams over %d channels (%d per channel); %d frames/s published over HTTP, "+
		"%s warm-up then %s measured; %s.\n\n",
		cfg.streams, cfg.channels, cfg.streams/cfg.channels, cfg.rate, cfg.warmup, cfg.duration, pinning)
	fmt.Fprintln(w, "| server | RSS idle | RSS held | per stream | RSS under load | frames published (not sent: server behind) | deliveries (received / expected) | streams ended | p50 | p99 | p99.9 | max | server CPU |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %.1f MiB | %.1f MiB | %.2f KiB | %.1f MiB | %d (%d not sent) | %d / %d | %d | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.0f%% |\n",
			r.Server, float64(r.RSSIdleKiB)/1024, float64(r.RSSHeldKiB)/1024, r.PerStreamKiB, float64(r.RSSLoadKiB)/1024,
			r.Published, r.PublishErrors, r.Received, r.Expected, r.Ended, r.P50ms, r.P99ms, r.P999ms, r.Maxms, r.CPUPercent)
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		fmt.Fprintf(w, "- %s (%s): `%s`\n", r.Server, r.Version, r.Command)
	}
	fmt.Fprintln(w, "\n```json")
	enc := json.NewEncoder(w)
	for _, r := range rs {
		enc.Encode(r)
	}
	fmt.Fprintln(w, "```")
}
