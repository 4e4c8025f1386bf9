package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/m0serve/m0/host"
	"github.com/m0serve/m0/internal/testutil"
	"github.com/m0serve/m0/realtime"
)

// The tests run this test binary as a Go program on the host: M0_HOST_APP
// names the application below, M0_HOST_ARGS its command line.
func TestMain(m *testing.M) {
	if name := os.Getenv("M0_HOST_APP"); name != "" {
		os.Args = append([]string{"hostapp"}, strings.Fields(os.Getenv("M0_HOST_ARGS"))...)
		os.Exit(host.Serve(apps[name], nil))
	}
	os.Exit(m.Run())
}

var apps = map[string]host.Application{
	"counting": counting{},
	"failing":  failing{},
	"single":   single{},
	"producer": &producerApp{every: 20 * time.Millisecond},
	"hourly":   &producerApp{every: time.Hour},
	"second":   failsSecond{},
	"badprod":  badProdApp{},
}

// counting answers with the loop and the thread whose handler served the
// request, and prints each Make as it is called.
type counting struct{}

func (counting) Make(ctx host.Context) (http.Handler, error) {
	fmt.Fprintf(os.Stderr, "make worker=%d/%d thread=%d/%d\n", ctx.Worker, ctx.Workers, ctx.Thread, ctx.Threads)
	mux := host.NewMux()
	who := fmt.Sprintf("worker=%d thread=%d", ctx.Worker, ctx.Thread)
	mux.HandleFunc("GET /who", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, who) })
	mux.HandleLoopFunc("GET /loop", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, who) })
	hold := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(realtime.HeaderHold, "stream")
		w.Header().Set(realtime.HeaderChannel, "clock")
		io.WriteString(w, "held?")
	}
	mux.HandleFunc("GET /hold-pool", hold)
	mux.HandleLoopFunc("GET /hold-loop", hold)
	mux.HandleFunc("GET /hold-pool-silent", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(realtime.HeaderHold, "stream")
		w.Header().Set(realtime.HeaderChannel, "clock")
	})
	mux.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) { panic("a view's bug") })
	// /meet answers once n requests are in at once (n from the query), or
	// 504 after 5 s: it shows how many run together.
	mux.HandleFunc("GET /meet", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if !meet(n) {
			w.WriteHeader(http.StatusGatewayTimeout)
		}
		io.WriteString(w, who)
	})
	return mux, nil
}

var (
	meetMu  sync.Mutex
	meeting = sync.NewCond(&meetMu)
	inside  int
)

// meet waits until n callers are inside at once, or 5 s.
func meet(n int) bool {
	meetMu.Lock()
	defer meetMu.Unlock()
	inside++
	meeting.Broadcast()
	deadline := time.Now().Add(5 * time.Second)
	go func() { time.Sleep(5 * time.Second); meeting.Broadcast() }()
	for inside < n && time.Now().Before(deadline) {
		meeting.Wait()
	}
	return inside >= n
}

// failsSecond's Make fails for the second loop; the first's drain runs.
type failsSecond struct{ counting }

func (a failsSecond) Make(ctx host.Context) (http.Handler, error) {
	if ctx.Worker == 1 {
		return nil, errors.New("no second database")
	}
	ctx.Drain(printDrain(fmt.Sprintf("drained worker=%d", ctx.Worker)))
	return a.counting.Make(ctx)
}

type printDrain string

func (p printDrain) Shutdown(context.Context) error {
	fmt.Fprintln(os.Stderr, string(p))
	return nil
}

type failing struct{}

func (failing) Make(ctx host.Context) (http.Handler, error) {
	return nil, errors.New("the database at db:5432 did not answer")
}

type single struct{ counting }

func (single) MaxWorkers() int { return 1 }

// producerApp's producer publishes a tick to "clock" every 20 ms, and to a
// refused channel once, printing what Publish returned.
type producerApp struct {
	counting
	every time.Duration // what Step returns
}

func (a *producerApp) Producer() host.Producer { return &ticker{every: a.every} }

func (a *producerApp) Make(ctx host.Context) (http.Handler, error) {
	if ctx.Hub == nil {
		return nil, errors.New("no hub for a producer")
	}
	return a.counting.Make(ctx)
}

type ticker struct {
	n     int
	every time.Duration
}

func (p *ticker) Make(ctx host.Context) error {
	if ctx.Worker != 0 || ctx.Hub == nil {
		return fmt.Errorf("producer made for worker %d, hub %v", ctx.Worker, ctx.Hub)
	}
	return nil
}

func (p *ticker) Step(out host.Publisher) time.Duration {
	p.n++
	if p.n == 1 {
		fmt.Fprintf(os.Stderr, "refused channel published=%v\n", out.Publish("\x01reserved", out.NextID(), []byte("x")))
		id := out.NextID()
		first := out.Publish("other", id, []byte("x"))
		fmt.Fprintf(os.Stderr, "id published=%v twice=%v made up=%v\n", first, out.Publish("other", id, []byte("x")),
			out.Publish("other", realtime.ID{Epoch: id.Epoch, Seq: id.Seq + 1000}, []byte("x")))
	}
	out.Publish("clock", out.NextID(), []byte("tick "+strconv.Itoa(p.n)))
	return p.every
}

type badProdApp struct{ counting }

func (badProdApp) Producer() host.Producer { return failingProducer{} }

type failingProducer struct{}

func (failingProducer) Make(host.Context) error           { return errors.New("no clock source") }
func (failingProducer) Step(host.Publisher) time.Duration { return time.Second }

// server is a child serving one of apps.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string
	stderr *testutil.LockedBuffer
	done   chan struct{}
	ready  atomic.Int32 // ready lines printed: one per worker process
}

var readyLine = regexp.MustCompile(`^🔥 m0serve: hostapp on http://127\.0\.0\.1:(\d+) \(protocol=go workers=\d+(?: threads=\d+)?\) blocking-threads=\d+$`)

// run runs app with args and returns the child, its exit awaited by wait.
func start(t *testing.T, app string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "M0_HOST_APP="+app, "M0_HOST_ARGS="+strings.Join(args, " "))
	cmd.Env = append(cmd.Env, env...)
	s := &server{t: t, cmd: cmd, stderr: &testutil.LockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				cmd.Wait()
				close(s.done)
				return s // exited before it was ready
			}
			if m := readyLine.FindStringSubmatch(line); m != nil {
				s.base = "http://127.0.0.1:" + m[1]
				s.ready.Add(1)
				go func() {
					for line := range lines {
						if readyLine.MatchString(line) {
							s.ready.Add(1)
						}
					}
					cmd.Wait()
					close(s.done)
				}()
				t.Cleanup(s.stop)
				return s
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("no ready line in 20 s; stderr:\n%s", s.stderr)
		}
	}
}

func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		if code := s.cmd.ProcessState.ExitCode(); code != 0 || strings.Contains(s.stderr.String(), "exiting anyway") {
			s.t.Errorf("exit %d after SIGTERM; stderr:\n%s", code, s.stderr)
		}
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		s.t.Errorf("no exit 10 s after SIGTERM")
	}
}

func (s *server) get(path string) (int, string) {
	s.t.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// exit runs app to its end and returns its exit code and stderr.
func exit(t *testing.T, app string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "M0_HOST_APP="+app, "M0_HOST_ARGS="+strings.Join(args, " "))
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

func freePort(t *testing.T) string {
	port, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}

func makes(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "make ") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// TestFactoryContract: Make runs once per loop and once per pool thread
// behind each, and each request is served by a handler one of them made.
func TestFactoryContract(t *testing.T) {
	s := start(t, "counting", nil, "--host", "127.0.0.1", "--port", freePort(t), "--threads", "2", "--blocking-threads", "2")
	waitFor(t, s.stderr, "make worker=1/2 thread=2/2")
	want := []string{
		"make worker=0/2 thread=0/2", "make worker=0/2 thread=1/2", "make worker=0/2 thread=2/2",
		"make worker=1/2 thread=0/2", "make worker=1/2 thread=1/2", "make worker=1/2 thread=2/2",
	}
	if got := makes(s.stderr.String()); !slices.Equal(got, want) {
		t.Fatalf("makes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Every request goes to a pool thread but /loop's, answered on the
	// loop; over a few connections both loops serve.
	seen := map[string]bool{}
	for i := 0; i < 40; i++ {
		tr := &http.Transport{DisableKeepAlives: true}
		c := &http.Client{Transport: tr}
		for _, path := range []string{"/who", "/loop"} {
			resp, err := c.Get(s.base + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			who := string(b)
			if path == "/loop" && !strings.HasSuffix(who, "thread=0") || path == "/who" && strings.HasSuffix(who, "thread=0") {
				t.Fatalf("%s served by %s", path, who)
			}
			seen[strings.Fields(who)[0]] = true
		}
	}
	if !seen["worker=0"] || !seen["worker=1"] {
		t.Errorf("only %v served 80 connections", seen)
	}
}

// TestNoPoolByDefault: a Go handler runs on its loop unless a pool is
// asked for; Make is called once.
func TestNoPoolByDefault(t *testing.T) {
	s := start(t, "counting", nil, "--host", "127.0.0.1", "--port", freePort(t))
	waitFor(t, s.stderr, "make worker=0/1")
	if got := makes(s.stderr.String()); !slices.Equal(got, []string{"make worker=0/1 thread=0/0"}) {
		t.Fatalf("makes: %q", got)
	}
	if code, body := s.get("/who"); code != 200 || body != "worker=0 thread=0" {
		t.Fatalf("/who: %d %q", code, body)
	}
}

// TestHoldOnPoolThread: a stream begun on a pool thread is refused with
// 409; the same route registered on the loop holds the stream.
func TestHoldOnPoolThread(t *testing.T) {
	s := start(t, "counting", nil, "--host", "127.0.0.1", "--port", freePort(t), "--blocking-threads", "1", "--realtime")
	for _, path := range []string{"/hold-pool", "/hold-pool-silent"} {
		code, body := s.get(path)
		if code != http.StatusConflict || !strings.Contains(body, "M0-Hold") {
			t.Fatalf("a hold on a pool thread (%s): %d %q, want 409", path, code, body)
		}
	}
	resp, err := http.Get(s.base + "/hold-loop")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("a hold on the loop: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestProducer: the producer's frames reach a stream held on the loop,
// numbered from the hub's counter; a refused channel's Publish is false.
func TestProducer(t *testing.T) {
	s := start(t, "producer", nil, "--host", "127.0.0.1", "--port", freePort(t))
	testProducer(t, s)
}

// TestAppTick: M0_APP_TICK_MS is the wait between steps, whatever Step
// returns (an hour here).
func TestAppTick(t *testing.T) {
	s := start(t, "hourly", []string{"M0_APP_TICK_MS=20"}, "--host", "127.0.0.1", "--port", freePort(t))
	testProducer(t, s)
}

func testProducer(t *testing.T, s *server) {
	resp, err := http.Get(s.base + "/hold-loop")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The frames' ids, event by event; a named event (m0-position, whose
	// id is the newest before the stream began, 0 before any frame) is
	// not a frame.
	r := bufio.NewReader(resp.Body)
	var ids []string
	id, named := "", false
	for len(ids) < 3 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%v after %q", err, ids)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if id != "" && !named {
				ids = append(ids, id)
			}
			id, named = "", false
		case strings.HasPrefix(line, "id: "):
			id = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			named = true
		}
	}
	var last realtime.ID
	for _, v := range ids {
		id, ok := realtime.ParseID(v)
		if !ok || id.Epoch != last.Epoch && !last.IsZero() || id.Seq <= last.Seq {
			t.Fatalf("ids %q are not one counter's, rising", ids)
		}
		last = id
	}
	waitFor(t, s.stderr, "refused channel published=false")
	waitFor(t, s.stderr, "id published=true twice=false made up=false")
}

// TestWorkers: under M0_WORKERS=2 each worker process makes its handler
// with its number, one producer runs (on worker 0: its Make refuses any
// other), and a stream held on either worker gets its frames with the
// same ids; SIGTERM to the supervisor ends both.
func TestWorkers(t *testing.T) {
	s := start(t, "producer", []string{"M0_WORKERS=2"}, "--host", "127.0.0.1", "--port", freePort(t))
	waitFor(t, s.stderr, "make worker=0/2 thread=0/0")
	waitFor(t, s.stderr, "make worker=1/2 thread=0/0")
	// Both serve (a worker prints its ready line once it takes
	// connections), or the first would keep every connection.
	for deadline := time.Now().Add(10 * time.Second); s.ready.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d ready lines of 2", s.ready.Load())
		}
	}
	// Four keep-alive connections: with the handoff, both workers hold
	// some. Each asks which worker it is on, then holds the clock.
	type held struct {
		who string
		r   *bufio.Reader
	}
	var streams []held
	for range 4 {
		c, err := net.Dial("tcp4", strings.TrimPrefix(s.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		io.WriteString(c, "GET /who HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		who, _ := io.ReadAll(resp.Body)
		io.WriteString(c, "GET /hold-loop HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err = http.ReadResponse(r, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("hold: %v %v", resp, err)
		}
		streams = append(streams, held{string(who), bufio.NewReader(resp.Body)})
	}
	workers := map[string]bool{}
	for _, h := range streams {
		workers[h.who] = true
	}
	if len(workers) != 2 {
		t.Fatalf("four connections on %v, want both workers", workers)
	}
	// Each stream's next ten frames, by sequence number: rising on each,
	// and the frames all streams got are the same everywhere.
	got := make([]map[uint64]string, len(streams))
	for i, h := range streams {
		got[i] = map[uint64]string{}
		var last realtime.ID
		id := realtime.ID{}
		for len(got[i]) < 10 {
			line, err := h.r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				id, _ = realtime.ParseID(line[4:])
			case strings.HasPrefix(line, "data: tick "):
				if id.Seq <= last.Seq || !last.IsZero() && id.Epoch != last.Epoch {
					t.Fatalf("stream %d: %v after %v", i, id, last)
				}
				last = id
				got[i][id.Seq] = line[6:]
			}
		}
	}
	common := 0
	for seq, data := range got[0] {
		same := true
		for _, g := range got[1:] {
			d, ok := g[seq]
			if ok && d != data {
				t.Fatalf("frame %d is %q on one stream and %q on another", seq, data, d)
			}
			same = same && ok
		}
		if same {
			common++
		}
	}
	if common == 0 {
		t.Fatalf("no frame reached all four streams: %v", got)
	}
	if n := strings.Count(s.stderr.String(), "refused channel published="); n != 1 {
		t.Fatalf("the producer stepped in %d workers", n)
	}
}

// waitFor waits up to 5 s for the child to write want to stderr, which
// reaches the test through a pipe and a goroutine, after the ready line.
func waitFor(t *testing.T, stderr fmt.Stringer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on stderr: %s", want, stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFailingMake: a Make that fails, the application's or the producer's,
// ends the process with 78 and its message, once.
func TestFailingMake(t *testing.T) {
	for app, msg := range map[string]string{
		"failing": "the application's make failed: the database at db:5432 did not answer",
		"badprod": "the producer's make failed: no clock source",
	} {
		code, _, stderr := exit(t, app, nil, "--port", freePort(t))
		if code != 78 || !strings.Contains(stderr, msg) || strings.Count(stderr, "failed") != 1 {
			t.Errorf("%s: exit %d, stderr %q", app, code, stderr)
		}
	}
	// What the first loop made is drained when the second's make fails.
	code, _, stderr := exit(t, "second", nil, "--port", freePort(t), "--threads", "2")
	if code != 78 || !strings.Contains(stderr, "make failed: no second database") || !strings.Contains(stderr, "drained worker=0") {
		t.Errorf("second: exit %d, stderr %q", code, stderr)
	}
}

// TestMaxWorkers: an application that runs under one worker refuses two
// with 78, and the doctor says so.
func TestMaxWorkers(t *testing.T) {
	code, _, stderr := exit(t, "single", []string{"M0_WORKERS=2"})
	if code != 78 || !strings.Contains(stderr, "at most 1 (max_workers)") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, stdout, _ := exit(t, "single", []string{"M0_WORKERS=2"}, "--doctor")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var report struct {
		Declares map[string]int
		Checks   []struct {
			Name string
			OK   bool
			Exit int
		}
		Exit int
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &report); err != nil {
		t.Fatal(err)
	}
	if code != 78 || report.Exit != 78 || report.Declares["max_workers"] != 1 || report.Declares["max_threads"] != 0 {
		t.Fatalf("doctor: exit %d, %+v", code, report)
	}
	i := slices.IndexFunc(report.Checks, func(c struct {
		Name string
		OK   bool
		Exit int
	}) bool {
		return c.Name == "max-workers"
	})
	if i < 0 || report.Checks[i].OK || report.Checks[i].Exit != 78 {
		t.Fatalf("checks: %+v", report.Checks)
	}
}

// TestRefusals: what a Go program refuses before it serves.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"a module", nil, []string{"app:wsgi"}, 2, "takes no MODULE[:ATTR]"},
		{"a python setting", nil, []string{"--protocol", "wsgi"}, 78, "--protocol is for a Python application"},
		{"a mount", nil, []string{"--mount", "/a=x:y"}, 78, "--mount is for a Python application"},
		{"subinterpreters", []string{"M0_INTERPRETERS=2"}, nil, 78, "--interpreters is for a Python application"},
		{"threads beside workers", []string{"M0_THREADS=2", "M0_WORKERS=2"}, nil, 78, "use one of --threads and --workers"},
		{"an app dir, loading no Python", nil, []string{"--app-dir", os.TempDir()}, 78, "--app-dir is for a Python application"},
		{"a loop, loading no Python", []string{"M0_LOOP=asyncio"}, nil, 78, "(leave --loop and M0_LOOP unset)"},
		{"a previous key alone", []string{"M0_GRANT_KEY_PREV=" + strings.Repeat("p", 32)}, nil, 78, "M0_GRANT_KEY_PREV is set, and M0_GRANT_KEY is not"},
		{"a tick without a producer", []string{"M0_APP_TICK_MS=5"}, nil, 78, "the application has no producer"},
		{"a grant key too short", []string{"M0_GRANT_KEY=short"}, nil, 78, "M0_GRANT_KEY is 5 bytes"},
	} {
		code, _, stderr := exit(t, "counting", c.env, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q", c.name, code, stderr)
		}
	}
}

// TestPoolServesConcurrently: three requests at once run on the three
// pool threads together, each on its own handler.
func TestPoolServesConcurrently(t *testing.T) {
	s := start(t, "counting", nil, "--host", "127.0.0.1", "--port", freePort(t), "--blocking-threads", "3")
	var wg sync.WaitGroup
	var mu sync.Mutex
	threads := map[string]bool{}
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(s.base + "/meet?n=3")
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("/meet: %d: the three did not run at once", resp.StatusCode)
			}
			mu.Lock()
			threads[string(b)] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(threads) != 3 {
		t.Errorf("served by %v, want three pool threads", threads)
	}
	for who := range threads {
		if !regexp.MustCompile(`^worker=0 thread=[123]$`).MatchString(who) {
			t.Errorf("served by %q", who)
		}
	}
}

// TestPoolWithoutHub: without --realtime nothing is held, so an M0-Hold
// answer from a pool thread is an ordinary response, as on the loop; and
// a pool thread's panic ends its request only, as on the loop.
func TestPoolWithoutHub(t *testing.T) {
	s := start(t, "counting", nil, "--host", "127.0.0.1", "--port", freePort(t), "--blocking-threads", "1")
	if code, body := s.get("/hold-pool"); code != 200 || body != "held?" {
		t.Fatalf("/hold-pool without a hub: %d %q", code, body)
	}
	if _, err := http.Get(s.base + "/panic"); err == nil {
		t.Fatal("a panicking view's request was answered")
	}
	if code, body := s.get("/who"); code != 200 || body != "worker=0 thread=1" {
		t.Fatalf("after a panic on the pool thread: %d %q", code, body)
	}
}

// TestMuxOnLoop: a route is answered on the loop when the pattern that
// serves it was registered with HandleLoop, not when a longer one claims
// the path.
func TestMuxOnLoop(t *testing.T) {
	m := host.NewMux()
	noop := func(http.ResponseWriter, *http.Request) {}
	m.HandleLoopFunc("GET /a/", noop)
	m.HandleFunc("GET /a/b", noop)
	m.HandleFunc("POST /a/", noop)
	for path, want := range map[string]bool{"GET /a/c": true, "HEAD /a/c": true, "GET /a/b": false, "POST /a/c": false, "GET /z": false} {
		method, p, _ := strings.Cut(path, " ")
		r, _ := http.NewRequest(method, "http://x"+p, nil)
		if got := m.OnLoop(r); got != want {
			t.Errorf("%s: OnLoop %v, want %v", path, got, want)
		}
	}
	var zero host.Mux // usable without NewMux, as http.ServeMux is
	zero.HandleLoopFunc("GET /x", noop)
	if r, _ := http.NewRequest("GET", "http://x/x", nil); !zero.OnLoop(r) {
		t.Error("a zero Mux's loop route is not on the loop")
	}
}
