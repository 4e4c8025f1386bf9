// Command xworkers measures publish-to-receive latency across workers (see bench/README.md):
// it starts m0serve --workers N --realtime on bench/apps/workers_bench.py,
// holds SSE streams spread over the workers, has one worker publish frames
// at a steady rate (POST /run: a loop in the application, in the worker that
// serves that request), and reports the publish-to-receive latency measured
// at the clients per receiving worker and overall, and the frames lost.
//
// Each frame's data is {"t":UNIX_NANOS,"i":INDEX,"n":SEQ}: the time the
// application published it (read just before m0pub.publish), its index in
// the run, and its sequence number on its channel (0, 1, 2 ... on each
// channel). A client subtracts t from its own clock (the same machine, the
// same clock), and a missing n on a stream is a lost frame. Which worker
// holds a stream is read from the kernel: after the streams are open,
// `ss -tnp` maps each server-side socket (by the client's port) to the pid
// that holds it, and the server's log maps pids to workers.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/m0serve/m0/bench/internal/procfs"
)

type config struct {
	m0serve, appDir, logPath   string
	workers, streams, channels int
	rate                       int
	warmup, duration           time.Duration
	handoff                    bool
	// --pg-listen mode: instances single-process m0serve instances (no
	// --workers) sharing the PostgreSQL at pgListen; pgPid is its
	// postmaster's pid (for its CPU time).
	pgListen  string
	instances int
	pgPid     int
}

func main() {
	var cfg config
	flag.StringVar(&cfg.m0serve, "m0serve", "bench/.bin/m0serve", "the m0serve binary")
	flag.StringVar(&cfg.appDir, "app-dir", "bench/apps", "directory of workers_bench.py")
	flag.StringVar(&cfg.logPath, "log", "", "the server's output goes here (default: a temporary file)")
	flag.IntVar(&cfg.workers, "workers", 2, "m0serve --workers")
	flag.IntVar(&cfg.streams, "streams", 2000, "SSE streams to hold")
	flag.IntVar(&cfg.channels, "channels", 100, "channels the streams are spread over (stream i on channel i mod channels)")
	flag.IntVar(&cfg.rate, "rate", 1000, "frames published per second, over all channels")
	flag.DurationVar(&cfg.warmup, "warmup", 3*time.Second, "publishing before the measured window (its frames count for loss, not latency)")
	flag.DurationVar(&cfg.duration, "duration", 15*time.Second, "the measured window")
	flag.BoolVar(&cfg.handoff, "handoff", true, "leave the handoff on (false: M0_HANDOFF=0)")
	flag.StringVar(&cfg.pgListen, "pg-listen", "", "PostgreSQL DSN: start -instances single-process instances with --realtime --pg-listen DSN instead of one with --workers")
	flag.IntVar(&cfg.instances, "instances", 2, "with -pg-listen: instances to start (the streams are spread over them, the first publishes)")
	flag.IntVar(&cfg.pgPid, "pg-pid", 0, "with -pg-listen: the postmaster's pid; its CPU time and its children's is reported")
	flag.Parse()
	for _, p := range []*string{&cfg.m0serve, &cfg.appDir} {
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
	if cfg.pgListen != "" {
		r, err := runPG(&cfg)
		if err != nil {
			fatal(err)
		}
		reportPG(os.Stdout, &cfg, r)
		return
	}
	r, err := run(&cfg)
	if err != nil {
		fatal(err)
	}
	report(os.Stdout, &cfg, r)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "xworkers:", err)
	os.Exit(1)
}

// --- the server --------------------------------------------------------------

type server struct {
	cmd    *exec.Cmd
	port   int
	base   string
	log    string
	pids   map[int]int // worker pid -> worker number
	exited chan error
}

var workerLine = regexp.MustCompile(`\[worker (\d+)\] pid=(\d+)`)

func start(cfg *config) (*server, error) { return startOne(cfg, cfg.logPath) }

func startOne(cfg *config, logPath string) (*server, error) {
	port, err := procfs.FreePort()
	if err != nil {
		return nil, err
	}
	s := &server{port: port, base: "http://127.0.0.1:" + strconv.Itoa(port), exited: make(chan error, 1)}
	s.log = logPath
	if s.log == "" {
		f, err := os.CreateTemp("", "xworkers-*.log")
		if err != nil {
			return nil, err
		}
		f.Close()
		s.log = f.Name()
	}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	argv := []string{cfg.m0serve, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--workers", strconv.Itoa(cfg.workers), "--realtime", "--app-dir", cfg.appDir,
		"workers_bench:application"}
	if cfg.pgListen != "" {
		argv = []string{cfg.m0serve, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--realtime", "--pg-listen", cfg.pgListen, "--app-dir", cfg.appDir, "workers_bench:application"}
	}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Env = os.Environ()
	if !cfg.handoff {
		s.cmd.Env = append(s.cmd.Env, "M0_HANDOFF=0")
	}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(os.Stderr, "==> %s\n", commandLine(cfg, port))
	if cfg.pgListen != "" {
		fmt.Fprintf(os.Stderr, "==> %s\n", strings.Join(argv, " "))
	}
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	logf.Close()
	go func() { s.exited <- s.cmd.Wait() }()

	// Ready: every worker's banner is in the log and a request is answered.
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(s.log)
		banners := bytes.Count(b, []byte("m0serve: workers_bench:application on "))
		want := cfg.workers
		if cfg.pgListen != "" {
			want = 1
		}
		if banners >= want {
			if resp, err := c.Get(s.base + "/pid"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					s.pids = map[int]int{}
					for _, m := range workerLine.FindAllSubmatch(b, -1) {
						w, _ := strconv.Atoi(string(m[1]))
						p, _ := strconv.Atoi(string(m[2]))
						s.pids[p] = w
					}
					if cfg.pgListen != "" {
						s.pids = map[int]int{s.cmd.Process.Pid: 0} // one process, no supervisor
					}
					if len(s.pids) < want {
						s.stop()
						return nil, fmt.Errorf("%d workers named in %s, want %d", len(s.pids), s.log, cfg.workers)
					}
					return s, nil
				}
			}
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			return nil, fmt.Errorf("the server exited (%v); its log is %s", err, s.log)
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("not ready after 30 s; its log is %s", s.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func commandLine(cfg *config, port int) string {
	env := ""
	if !cfg.handoff {
		env = "M0_HANDOFF=0 "
	}
	if cfg.pgListen != "" {
		return fmt.Sprintf("%s --host 127.0.0.1 --port %d --realtime --pg-listen %s --app-dir %s workers_bench:application",
			cfg.m0serve, port, cfg.pgListen, cfg.appDir)
	}
	return fmt.Sprintf("%s%s --host 127.0.0.1 --port %d --workers %d --realtime --app-dir %s workers_bench:application",
		env, cfg.m0serve, port, cfg.workers, cfg.appDir)
}

// stop sends SIGINT to the supervisor (it drains the workers), then kills
// the process group if it has not exited within 10 s.
func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
}

// cpuTicks is the user and system time of the supervisor and every worker
// (and what they reaped), in clock ticks (1/100 s), and per worker.
func (s *server) cpuTicks() (total int64, per map[int]int64) {
	per = map[int]int64{}
	total = procfs.Ticks(s.cmd.Process.Pid, true)
	for pid, w := range s.pids {
		t := procfs.Ticks(pid, true)
		per[w] = t
		total += t
	}
	return total, per
}

var ssPid = regexp.MustCompile(`pid=(\d+)`)

// holders maps each established server-side socket on port, by its peer's
// (the client's) port, to the pid that holds it (the first, if several do).
func holders(port int) (map[int]int, error) {
	out, err := exec.Command("ss", "-tnpH", "state", "established",
		fmt.Sprintf("( sport = :%d )", port)).Output()
	if err != nil {
		return nil, fmt.Errorf("ss: %w", err)
	}
	m := map[int]int{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		peer := f[3]
		pp, err := strconv.Atoi(peer[strings.LastIndexByte(peer, ':')+1:])
		if err != nil {
			continue
		}
		if sm := ssPid.FindStringSubmatch(line); sm != nil {
			m[pp], _ = strconv.Atoi(sm[1])
		} else {
			m[pp] = 0
		}
	}
	return m, nil
}

// --- the streams -------------------------------------------------------------

type stream struct {
	ch        int
	inst      int // -pg-listen: the instance it is held on
	localPort int
	worker    int // -1: not found by ss
	got       []bool
	lat       []int32 // µs, frames of the measured window
	dups      int
	reorder   int // a frame whose n is below one read before
	badIDs    int // an id not above the one before
	ended     bool
}

type streams struct {
	cfg    *config
	all    []*stream
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// frames of the run, and the first index of the measured window
	frames, windowFrom int
}

// open holds every stream, 200 opening at a time, and returns once each
// has read its first event (the server has it subscribed by then).
func (ss *streams) open(base string) error { return ss.openOn([]string{base}) }

// openOn is open over several instances: stream i on instance
// (i div channels) mod len(bases), so each holds every channel.
func (ss *streams) openOn(bases []string) error {
	ss.client = &http.Client{Transport: &http.Transport{
		DisableCompression: true, ResponseHeaderTimeout: 30 * time.Second, MaxIdleConnsPerHost: -1,
	}}
	ss.ctx, ss.cancel = context.WithCancel(context.Background())
	sem := make(chan struct{}, 200)
	var opening sync.WaitGroup
	var firstErr atomic.Value
	for i := range ss.cfg.streams {
		st := &stream{ch: i % ss.cfg.channels, worker: -1, inst: (i / ss.cfg.channels) % len(bases)}
		base := bases[st.inst]
		st.got = make([]bool, ss.frames/ss.cfg.channels+1)
		ss.all = append(ss.all, st)
		sem <- struct{}{}
		opening.Add(1)
		go func() {
			defer func() { <-sem }()
			if err := ss.hold(base, st, &opening); err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
		}()
		if err, _ := firstErr.Load().(error); err != nil {
			return err
		}
	}
	opening.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	return nil
}

func (ss *streams) hold(base string, st *stream, opened *sync.WaitGroup) error {
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		st.localPort = info.Conn.LocalAddr().(*net.TCPAddr).Port
	}}
	ctx := httptrace.WithClientTrace(ss.ctx, trace)
	u := base + "/events?c=ch" + strconv.Itoa(st.ch)
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := ss.client.Do(req)
	if err != nil {
		opened.Done()
		return err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		opened.Done()
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	ss.wg.Add(1)
	go func() {
		defer ss.wg.Done()
		defer resp.Body.Close()
		br := bufio.NewReaderSize(resp.Body, 4096)
		first := true
		var lastID, lastN int64 = -1, -1
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				if ss.ctx.Err() == nil {
					st.ended = true
				}
				break
			}
			now := time.Now().UnixNano()
			if first && len(bytes.TrimSpace(line)) > 0 {
				first = false
				opened.Done()
			}
			if v, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
				v = bytes.TrimSpace(v)
				if k := bytes.LastIndexByte(v, '-'); k >= 0 {
					seq, _ := strconv.ParseInt(string(v[k+1:]), 10, 64)
					if seq <= lastID {
						st.badIDs++
					}
					lastID = seq
				}
				continue
			}
			if !bytes.HasPrefix(line, []byte("data:")) {
				continue
			}
			t, ok1 := field(line, `"t":`)
			i, ok2 := field(line, `"i":`)
			n, ok3 := field(line, `"n":`)
			if !ok1 || !ok2 || !ok3 {
				continue // the position event's empty data
			}
			if n < lastN {
				st.reorder++
			}
			lastN = n
			if n >= 0 && int(n) < len(st.got) {
				if st.got[n] {
					st.dups++
				}
				st.got[n] = true
			}
			if int(i) >= ss.windowFrom {
				st.lat = append(st.lat, int32((now-t)/1000))
			}
		}
		if first {
			opened.Done()
		}
	}()
	return nil
}

// field reads the decimal number after key in a data line.
func field(line []byte, key string) (int64, bool) {
	k := bytes.Index(line, []byte(key))
	if k < 0 {
		return 0, false
	}
	var n int64
	j := k + len(key)
	for ; j < len(line) && '0' <= line[j] && line[j] <= '9'; j++ {
		n = n*10 + int64(line[j]-'0')
	}
	return n, j > k+len(key)
}

func (ss *streams) close() {
	ss.cancel()
	ss.wg.Wait()
}

// expected is the frames of the run published on channel ch.
func (ss *streams) expected(ch int) int {
	c := ss.cfg.channels
	n := ss.frames / c
	if ch < ss.frames%c {
		n++
	}
	return n
}

// --- the run -----------------------------------------------------------------

type publishResult struct {
	Pid        int     `json:"pid"`
	Published  int     `json:"published"`
	Refused    int     `json:"refused"`
	Seconds    float64 `json:"seconds"`
	LateMaxMs  float64 `json:"late_max_ms"`
	Worker     int     `json:"worker"`
	WallClockS float64 `json:"request_seconds"`
}

type group struct {
	Name             string  `json:"name"`
	Worker           int     `json:"worker"`
	Pid              int     `json:"pid"`
	Publisher        bool    `json:"publisher"`
	Streams          int     `json:"streams"`
	WindowDeliveries int     `json:"window_deliveries"`
	WindowExpected   int     `json:"window_expected"`
	Owed             int     `json:"deliveries_owed"`
	Lost             int     `json:"lost"`
	Gaps             int     `json:"gaps"`
	Dups             int     `json:"duplicates"`
	Reordered        int     `json:"reordered"`
	BadIDs           int     `json:"ids_not_increasing"`
	Ended            int     `json:"streams_ended"`
	P50ms            float64 `json:"p50_ms"`
	P99ms            float64 `json:"p99_ms"`
	P999ms           float64 `json:"p999_ms"`
	Maxms            float64 `json:"max_ms"`
	CPUSeconds       float64 `json:"cpu_seconds"`
}

type result struct {
	Command        string        `json:"command"`
	Log            string        `json:"log"`
	Workers        map[int]int   `json:"worker_pids"`
	Publish        publishResult `json:"publish"`
	Frames         int           `json:"frames"`
	WindowFrom     int           `json:"window_from_index"`
	OpenSeconds    float64       `json:"open_seconds"`
	Groups         []group       `json:"groups"`
	Overall        group         `json:"overall"`
	ServerCPUPct   float64       `json:"server_cpu_percent"`
	SupervisorCPUs float64       `json:"supervisor_cpu_seconds"`
}

func run(cfg *config) (*result, error) {
	s, err := start(cfg)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	r := &result{Command: commandLine(cfg, s.port), Log: s.log, Workers: map[int]int{}}
	for p, w := range s.pids {
		r.Workers[w] = p
	}
	ss := &streams{cfg: cfg}
	ss.frames = int((cfg.warmup + cfg.duration).Seconds() * float64(cfg.rate))
	ss.windowFrom = int(cfg.warmup.Seconds() * float64(cfg.rate))
	r.Frames, r.WindowFrom = ss.frames, ss.windowFrom

	t0 := time.Now()
	if err := ss.open(s.base); err != nil {
		return nil, err
	}
	r.OpenSeconds = time.Since(t0).Seconds()
	time.Sleep(time.Second)
	owner, err := holders(s.port)
	if err != nil {
		return nil, err
	}
	perWorker := map[int]int{}
	for _, st := range ss.all {
		if pid, ok := owner[st.localPort]; ok {
			if w, ok := s.pids[pid]; ok {
				st.worker = w
			}
		}
		perWorker[st.worker]++
	}
	fmt.Fprintf(os.Stderr, "    %d streams held in %.1f s; per worker %v\n", cfg.streams, r.OpenSeconds, perWorker)

	// Publish from the worker that serves /run, on a connection of its own.
	cpu0, per0 := s.cpuTicks()
	sup0 := procfs.Ticks(s.cmd.Process.Pid, true)
	pc := &http.Client{Timeout: cfg.warmup + cfg.duration + 60*time.Second,
		Transport: &http.Transport{DisableKeepAlives: true}}
	u := fmt.Sprintf("%s/run?rate=%d&frames=%d&channels=%d", s.base, cfg.rate, ss.frames, cfg.channels)
	pt := time.Now()
	resp, err := pc.Post(u, "text/plain", nil)
	if err != nil {
		return nil, fmt.Errorf("POST /run: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("POST /run: %s %s", resp.Status, body)
	}
	if err := json.Unmarshal(body, &r.Publish); err != nil {
		return nil, fmt.Errorf("POST /run: %w (%s)", err, body)
	}
	r.Publish.WallClockS = time.Since(pt).Seconds()
	cpu1, per1 := s.cpuTicks()
	sup1 := procfs.Ticks(s.cmd.Process.Pid, true)
	r.ServerCPUPct = float64(cpu1-cpu0) / time.Since(pt).Seconds() // ticks are 1/100 s: % of a core
	r.SupervisorCPUs = float64(sup1-sup0) / 100
	var ok bool
	if r.Publish.Worker, ok = s.pids[r.Publish.Pid]; !ok {
		r.Publish.Worker = -1
	}
	time.Sleep(2 * time.Second) // frames still on their way
	ss.close()

	// Per receiving worker, then overall.
	byWorker := map[int][]*stream{}
	for _, st := range ss.all {
		byWorker[st.worker] = append(byWorker[st.worker], st)
	}
	keys := make([]int, 0, len(byWorker))
	for w := range byWorker {
		keys = append(keys, w)
	}
	slices.Sort(keys)
	for _, w := range keys {
		g := ss.summarize(byWorker[w])
		g.Worker, g.Pid = w, r.Workers[w]
		g.Name = fmt.Sprintf("worker %d", w)
		if w < 0 {
			g.Name, g.Pid = "not found by ss", 0
		}
		g.Publisher = w >= 0 && w == r.Publish.Worker
		g.CPUSeconds = float64(per1[w]-per0[w]) / 100
		r.Groups = append(r.Groups, g)
	}
	r.Overall = ss.summarize(ss.all)
	r.Overall.Name, r.Overall.Worker = "all", -1
	r.Overall.CPUSeconds = float64(cpu1-cpu0) / 100
	return r, nil
}

func (ss *streams) summarize(sts []*stream) group {
	g := group{Streams: len(sts)}
	var lat []int32
	windowPerCh := func(ch int) int { // frames of the window on channel ch
		n := 0
		for i := ss.windowFrom; i < ss.frames; i++ {
			if i%ss.cfg.channels == ch {
				n++
			}
		}
		return n
	}
	wcache := map[int]int{}
	for _, st := range sts {
		lat = append(lat, st.lat...)
		g.WindowDeliveries += len(st.lat)
		if _, ok := wcache[st.ch]; !ok {
			wcache[st.ch] = windowPerCh(st.ch)
		}
		g.WindowExpected += wcache[st.ch]
		exp := ss.expected(st.ch)
		g.Owed += exp
		inGap := false
		for n := 0; n < exp; n++ {
			if !st.got[n] {
				g.Lost++
				if !inGap {
					g.Gaps++
				}
				inGap = true
			} else {
				inGap = false
			}
		}
		g.Dups += st.dups
		g.Reordered += st.reorder
		g.BadIDs += st.badIDs
		if st.ended {
			g.Ended++
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1000 }
		g.P50ms, g.P99ms, g.P999ms, g.Maxms = q(0.50), q(0.99), q(0.999), float64(lat[len(lat)-1])/1000
	}
	return g
}

// --- the report --------------------------------------------------------------

func report(w io.Writer, cfg *config, r *result) {
	p := r.Publish
	pub := "worker ?"
	if p.Worker >= 0 {
		pub = fmt.Sprintf("worker %d", p.Worker)
	}
	fmt.Fprintf(w, "%d SSE streams over %d channels (stream i on channel ch{i mod %d}), held in %.1f s; "+
		"%d frames published by %s (pid %d) at %d frames/s: %d published, %d refused, in %.2f s "+
		"(schedule at worst %.1f ms late); the first %d frames (%s) are the warm-up, the latency is over the "+
		"%d after them (%s). Server CPU (supervisor and workers) over the publishing: %.0f%% of a core "+
		"(supervisor %.2f CPU-s).\n\n",
		cfg.streams, cfg.channels, cfg.channels, r.OpenSeconds,
		r.Frames, pub, p.Pid, cfg.rate, p.Published, p.Refused, p.Seconds, p.LateMaxMs,
		r.WindowFrom, cfg.warmup, r.Frames-r.WindowFrom, cfg.duration, r.ServerCPUPct, r.SupervisorCPUs)
	fmt.Fprintln(w, "| receiving worker | pid | publisher's worker | streams | deliveries in the window (received / owed) | p50 ms | p99 ms | p99.9 ms | max ms | lost frames (of owed, whole run) | gaps | duplicates | out of order | streams ended | worker CPU-s |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	row := func(g group, pid string, same string) {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d / %d | %.2f | %.2f | %.2f | %.2f | %d of %d | %d | %d | %d | %d | %.2f |\n",
			g.Name, pid, same, g.Streams, g.WindowDeliveries, g.WindowExpected, g.P50ms, g.P99ms, g.P999ms, g.Maxms,
			g.Lost, g.Owed, g.Gaps, g.Dups, g.Reordered, g.Ended, g.CPUSeconds)
	}
	for _, g := range r.Groups {
		same := "no (over the bus)"
		if g.Publisher {
			same = "yes"
		}
		if g.Worker < 0 {
			same = "?"
		}
		row(g, strconv.Itoa(g.Pid), same)
	}
	row(r.Overall, "", "")
	bad := r.Overall.BadIDs
	fmt.Fprintf(w, "\nEvent ids on every stream strictly increasing: %s.\n",
		map[bool]string{true: "yes", false: fmt.Sprintf("no (%d not above the one before)", bad)}[bad == 0])
	fmt.Fprintln(w, "\n```json")
	json.NewEncoder(w).Encode(r)
	fmt.Fprintln(w, "```")
}

// --- -pg-listen: instances sharing one PostgreSQL -----------------------------

// pgTicks is the CPU time of the postmaster at pid and of every process
// whose parent it is (the backends, the checkpointer, the WAL writer ...),
// with what the postmaster reaped, in clock ticks.
func pgTicks(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	sum := procfs.Ticks(pid, true)
	for _, child := range procfs.Children(pid) {
		sum += procfs.Ticks(child, true)
	}
	return sum
}

type instanceInfo struct {
	Name       string  `json:"name"`
	Port       int     `json:"port"`
	Pid        int     `json:"pid"`
	Log        string  `json:"log"`
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUPct     float64 `json:"cpu_percent"`
	LogErrors  int     `json:"log_warnings_errors"`
	FirstError string  `json:"first_warning_error"`
}

type pgResult struct {
	Commands     []string       `json:"commands"`
	Instances    []instanceInfo `json:"instances"`
	Publish      publishResult  `json:"publish"`
	AchievedRate float64        `json:"achieved_rate"`
	Frames       int            `json:"frames"`
	WindowFrom   int            `json:"window_from_index"`
	OpenSeconds  float64        `json:"open_seconds"`
	Groups       []group        `json:"groups"`
	Overall      group          `json:"overall"`
	PGCPUSeconds float64        `json:"pg_cpu_seconds"`
	PGCPUPct     float64        `json:"pg_cpu_percent"`
	Seconds      float64        `json:"measured_seconds"`
}

var logTrouble = regexp.MustCompile(`(?i)level=(WARN|ERROR)|did not take|cannot be reached|panic|traceback`)

func runPG(cfg *config) (*pgResult, error) {
	r := &pgResult{}
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for i := range cfg.instances {
		lp := ""
		if cfg.logPath != "" {
			lp = strings.TrimSuffix(cfg.logPath, ".log") + fmt.Sprintf("-%c.log", 'a'+i)
		}
		s, err := startOne(cfg, lp)
		if err != nil {
			return nil, fmt.Errorf("instance %c: %w", 'A'+i, err)
		}
		servers = append(servers, s)
		r.Commands = append(r.Commands, commandLine(cfg, s.port))
	}
	bases := make([]string, len(servers))
	for i, s := range servers {
		bases[i] = s.base
	}
	ss := &streams{cfg: cfg}
	ss.frames = int((cfg.warmup + cfg.duration).Seconds() * float64(cfg.rate))
	ss.windowFrom = int(cfg.warmup.Seconds() * float64(cfg.rate))
	r.Frames, r.WindowFrom = ss.frames, ss.windowFrom
	t0 := time.Now()
	if err := ss.openOn(bases); err != nil {
		return nil, err
	}
	r.OpenSeconds = time.Since(t0).Seconds()
	time.Sleep(time.Second)
	perInst := map[int]int{}
	for _, st := range ss.all {
		st.worker = st.inst
		perInst[st.inst]++
	}
	fmt.Fprintf(os.Stderr, "    %d streams held in %.1f s; per instance %v\n", cfg.streams, r.OpenSeconds, perInst)

	cpu0 := make([]int64, len(servers))
	for i, s := range servers {
		cpu0[i] = procfs.Ticks(s.cmd.Process.Pid, true)
	}
	pg0 := pgTicks(cfg.pgPid)
	pc := &http.Client{Timeout: cfg.warmup + cfg.duration + 120*time.Second,
		Transport: &http.Transport{DisableKeepAlives: true}}
	u := fmt.Sprintf("%s/run?rate=%d&frames=%d&channels=%d", servers[0].base, cfg.rate, ss.frames, cfg.channels)
	pt := time.Now()
	resp, err := pc.Post(u, "text/plain", nil)
	if err != nil {
		return nil, fmt.Errorf("POST /run: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("POST /run: %s %s", resp.Status, body)
	}
	if err := json.Unmarshal(body, &r.Publish); err != nil {
		return nil, fmt.Errorf("POST /run: %w (%s)", err, body)
	}
	r.Publish.WallClockS = time.Since(pt).Seconds()
	if r.Publish.Seconds > 0 {
		r.AchievedRate = float64(r.Publish.Published) / r.Publish.Seconds
	}
	time.Sleep(2 * time.Second) // frames still on their way
	secs := time.Since(pt).Seconds()
	r.Seconds = secs
	for i, s := range servers {
		c := float64(procfs.Ticks(s.cmd.Process.Pid, true)-cpu0[i]) / 100
		inf := instanceInfo{Name: fmt.Sprintf("instance %c", 'A'+i), Port: s.port, Pid: s.cmd.Process.Pid, Log: s.log,
			CPUSeconds: c, CPUPct: 100 * c / secs}
		r.Instances = append(r.Instances, inf)
	}
	pgc := float64(pgTicks(cfg.pgPid)-pg0) / 100
	r.PGCPUSeconds, r.PGCPUPct = pgc, 100*pgc/secs
	ss.close()
	for i := range r.Instances {
		b, _ := os.ReadFile(r.Instances[i].Log)
		for _, line := range strings.Split(string(b), "\n") {
			if logTrouble.MatchString(line) {
				if r.Instances[i].LogErrors == 0 {
					r.Instances[i].FirstError = line
				}
				r.Instances[i].LogErrors++
			}
		}
	}
	byInst := map[int][]*stream{}
	for _, st := range ss.all {
		byInst[st.inst] = append(byInst[st.inst], st)
	}
	for i := range servers {
		g := ss.summarize(byInst[i])
		g.Worker, g.Pid = i, servers[i].cmd.Process.Pid
		g.Name = r.Instances[i].Name
		g.Publisher = i == 0
		g.CPUSeconds = r.Instances[i].CPUSeconds
		r.Groups = append(r.Groups, g)
	}
	r.Overall = ss.summarize(ss.all)
	r.Overall.Name, r.Overall.Worker = "all", -1
	for _, in := range r.Instances {
		r.Overall.CPUSeconds += in.CPUSeconds
	}
	return r, nil
}

func reportPG(w io.Writer, cfg *config, r *pgResult) {
	p := r.Publish
	fmt.Fprintf(w, "%d SSE streams over %d channels (stream i on channel ch{i mod %d}, on instance (i div %d) mod %d: every instance holds every channel), held in %.1f s; "+
		"%d frames published by instance A (pid %d) at %d frames/s: %d published, %d refused, in %.2f s "+
		"(achieved %.0f frames/s; schedule at worst %.1f ms late); the first %d frames (%s) are the warm-up, the latency is over the "+
		"%d after them (%s).\n\n",
		cfg.streams, cfg.channels, cfg.channels, cfg.channels, cfg.instances, r.OpenSeconds,
		r.Frames, p.Pid, cfg.rate, p.Published, p.Refused, p.Seconds, r.AchievedRate, p.LateMaxMs,
		r.WindowFrom, cfg.warmup, r.Frames-r.WindowFrom, cfg.duration)
	fmt.Fprintf(w, "CPU over the publishing and the 2 s after it (%.1f s): ", r.Seconds)
	for _, in := range r.Instances {
		fmt.Fprintf(w, "%s %.2f CPU-s (%.0f%% of a core); ", in.Name, in.CPUSeconds, in.CPUPct)
	}
	fmt.Fprintf(w, "PostgreSQL (postmaster and its children) %.2f CPU-s (%.0f%% of a core).\n\n", r.PGCPUSeconds, r.PGCPUPct)
	fmt.Fprintln(w, "| receiving instance | pid | path | streams | deliveries in the window (received / owed) | p50 ms | p99 ms | p99.9 ms | max ms | lost frames (of owed, whole run) | gaps | duplicates | out of order | streams ended | instance CPU-s |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	row := func(g group, pid, path string) {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d / %d | %.2f | %.2f | %.2f | %.2f | %d of %d | %d | %d | %d | %d | %.2f |\n",
			g.Name, pid, path, g.Streams, g.WindowDeliveries, g.WindowExpected, g.P50ms, g.P99ms, g.P999ms, g.Maxms,
			g.Lost, g.Owed, g.Gaps, g.Dups, g.Reordered, g.Ended, g.CPUSeconds)
	}
	for _, g := range r.Groups {
		path := "other instance (through PostgreSQL)"
		if g.Publisher {
			path = "publisher's own (in process)"
		}
		row(g, strconv.Itoa(g.Pid), path)
	}
	row(r.Overall, "", "")
	bad := r.Overall.BadIDs
	fmt.Fprintf(w, "\nEvent ids on every stream strictly increasing: %s.\n",
		map[bool]string{true: "yes", false: fmt.Sprintf("no (%d not above the one before)", bad)}[bad == 0])
	for _, in := range r.Instances {
		if in.LogErrors > 0 {
			fmt.Fprintf(w, "\n%s logged %d warning/error lines; the first: `%s`\n", in.Name, in.LogErrors, strings.TrimSpace(in.FirstError))
		}
	}
	fmt.Fprintln(w, "\n```json")
	json.NewEncoder(w).Encode(r)
	fmt.Fprintln(w, "```")
}
