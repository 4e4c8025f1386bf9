package wsgi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/internal/front"
	"github.com/m0serve/m0/internal/testutil"
	"github.com/m0serve/m0/wsgi"
)

type server struct {
	URL string
	log *testutil.LockedBuffer
	h   *wsgi.Handler
}

// frontends are the two servers the bridge runs under: net/http, as a Go
// program mounts it, and fasthttp, as m0serve serves it.
var frontends = []string{"net/http", "fasthttp"}

// both runs a test body under each front end.
func both(t *testing.T, body func(t *testing.T, fe string)) {
	for _, fe := range frontends {
		t.Run(fe, func(t *testing.T) { body(t, fe) })
	}
}

// serve starts a test server for bridge:attr under the front end fe.
func serve(t testing.TB, fe, attr string, opts *wsgi.Options) *server {
	t.Helper()
	dir, _ := filepath.Abs("testdata")
	app, err := m0.LoadApp("bridge:"+attr, &m0.LoadOptions{Dir: dir})
	if err != nil {
		t.Fatalf("LoadApp: %v", err)
	}
	log := &testutil.LockedBuffer{}
	if opts == nil {
		opts = wsgi.DefaultOptions()
	}
	opts.Logger = slog.New(slog.NewTextHandler(log, nil))
	h := wsgi.New(app, opts)
	if fe == "net/http" {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return &server{s.URL, log, h}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := front.FastServer(h, front.Limits{})
	go fs.Serve(ln)
	t.Cleanup(func() { fs.Shutdown() })
	return &server{"http://" + ln.Addr().String(), log, h}
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// raw sends a request as written and returns everything the server sends
// until it closes the connection.
func raw(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, req)
	b, _ := io.ReadAll(c)
	return string(b)
}

func TestEnviron(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "environ", nil)
		addr := strings.TrimPrefix(s.URL, "http://")
		resp := raw(t, addr, "POST /caf%C3%A9/x?a=1&b=%20 HTTP/1.1\r\nHost: example.com:8080\r\n"+
			"X-Multi: a\r\nX-Multi: b\r\nX_Forwarded_For: 6.6.6.6\r\nX-Forwarded-For: 1.2.3.4\r\n"+
			"Content-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
		_, body, _ := strings.Cut(resp, "\r\n\r\n")
		var env map[string]any
		if err := json.Unmarshal([]byte(body), &env); err != nil {
			t.Fatalf("%v in %q", err, resp)
		}
		want := map[string]any{
			"REQUEST_METHOD":       "POST",
			"SCRIPT_NAME":          "",
			"PATH_INFO":            "/caf\u00c3\u00a9/x",
			"QUERY_STRING":         "a=1&b=%20",
			"CONTENT_TYPE":         "text/plain",
			"CONTENT_LENGTH":       "5",
			"SERVER_NAME":          "example.com",
			"SERVER_PORT":          "8080",
			"SERVER_PROTOCOL":      "HTTP/1.1",
			"HTTP_HOST":            "example.com:8080",
			"HTTP_X_MULTI":         "a,b",
			"HTTP_X_FORWARDED_FOR": "1.2.3.4",
			"REMOTE_ADDR":          "127.0.0.1",
			"wsgi.url_scheme":      "http",
			"wsgi.multithread":     true,
			"wsgi.multiprocess":    false,
			"wsgi.run_once":        false,
			"body":                 "hello",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s = %#v, want %#v", k, env[k], v)
			}
		}
		for _, k := range []string{"HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"} {
			if _, ok := env[k]; ok {
				t.Errorf("%s present", k)
			}
		}
		if v, _ := env["wsgi.version"].([]any); len(v) != 2 || v[0] != 1.0 || v[1] != 0.0 {
			t.Errorf("wsgi.version = %v", env["wsgi.version"])
		}
		if env["REMOTE_PORT"] == "" || env["REMOTE_PORT"] == nil {
			t.Errorf("REMOTE_PORT missing")
		}
	})
}

// TestRepeatedHeaders: a header sent more than once reaches the
// application as one value, joined with "," (Cookie with "; "), in the
// order sent, whatever the number of other headers before it.
func TestRepeatedHeaders(t *testing.T) {
	many := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "X-Filler-%d: %d\r\n", i, i)
		}
		return b.String()
	}
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "environ", nil)
		addr := strings.TrimPrefix(s.URL, "http://")
		for _, c := range []struct {
			name, headers string
			want          map[string]string
		}{
			{"twice", "X-Multi: a\r\nX-Multi: b\r\n", map[string]string{"HTTP_X_MULTI": "a,b"}},
			{"apart, names in any case", "Accept: text/html\r\nX-Other: o\r\naccept: */*\r\nACCEPT: x/y\r\n",
				map[string]string{"HTTP_ACCEPT": "text/html,*/*,x/y", "HTTP_X_OTHER": "o"}},
			{"a value with its own commas", "Forwarded: a, b\r\nForwarded: c\r\n", map[string]string{"HTTP_FORWARDED": "a, b,c"}},
			{"cookie", "Cookie: a=1\r\nCookie: b=2\r\n", map[string]string{"HTTP_COOKIE": "a=1; b=2"}},
			{"after 64 other names", many(70) + "X-Late: 1\r\nX-Late: 2\r\n",
				map[string]string{"HTTP_X_LATE": "1,2", "HTTP_X_FILLER_0": "0", "HTTP_X_FILLER_69": "69"}},
			{"first before 64 other names, then after", "X-Early: 1\r\n" + many(70) + "X-Early: 2\r\n",
				map[string]string{"HTTP_X_EARLY": "1,2", "HTTP_X_FILLER_64": "64"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				resp := raw(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n"+c.headers+"Connection: close\r\n\r\n")
				_, body, _ := strings.Cut(resp, "\r\n\r\n")
				var env map[string]any
				if err := json.Unmarshal([]byte(body), &env); err != nil {
					t.Fatalf("%v in %q", err, resp)
				}
				for k, v := range c.want {
					if env[k] != v {
						t.Errorf("%s = %#v, want %q", k, env[k], v)
					}
				}
			})
		}
	})
}

func TestStreamChunkedAndClosed(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "stream", nil)
		closed := serve(t, fe, "closed_count", nil) // the same interpreter, so the same counter
		count := func() int {
			_, n := get(t, closed.URL)
			c, _ := strconv.Atoi(n)
			return c
		}
		before := count()
		addr := strings.TrimPrefix(s.URL, "http://")
		resp := raw(t, addr, "GET /?n=3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if !strings.Contains(resp, "Transfer-Encoding: chunked") || !strings.HasSuffix(resp, "0\r\n\r\n") {
			t.Errorf("not a complete chunked response:\n%q", resp)
		}
		for i := 0; i < 3; i++ {
			if !strings.Contains(resp, "part "+string(rune('0'+i))) {
				t.Errorf("part %d missing", i)
			}
		}
		resp = raw(t, addr, "GET /?n=2 HTTP/1.0\r\n\r\n")
		if strings.Contains(resp, "chunked") || strings.Contains(resp, "Content-Length") || !strings.HasSuffix(resp, "part 1\n") {
			t.Errorf("HTTP/1.0 stream not close-delimited:\n%q", resp)
		}
		if n := count() - before; n != 2 {
			t.Errorf("close() called %d times after two streams, want 2", n)
		}

		// A client that leaves mid-stream: close() is still called.
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /?n=1000&delay=0.01 HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		c.Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if count()-before == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("close() not called after the client left")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestFailureAfterHeadTruncates(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "raise_after_head", nil)
		resp := raw(t, strings.TrimPrefix(s.URL, "http://"), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if !strings.Contains(resp, "first\n") {
			t.Errorf("the first chunk did not arrive:\n%q", resp)
		}
		if strings.HasSuffix(resp, "0\r\n\r\n") {
			t.Errorf("a failed stream ended with the chunked terminator:\n%q", resp)
		}
		if !strings.Contains(s.log.String(), "RuntimeError: after the head") {
			t.Errorf("log lacks the traceback:\n%s", s.log)
		}
	})
}

func TestBadApplications(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		for _, c := range []struct{ attr, want string }{
			{"raise_before", "ValueError: before start_response"},
			{"bad_header", "control character"},
			{"non_latin1", "latin-1"},
		} {
			t.Run(c.attr, func(t *testing.T) {
				s := serve(t, fe, c.attr, nil)
				addr := strings.TrimPrefix(s.URL, "http://")
				for i := 0; i < 3; i++ { // the server keeps serving
					resp := raw(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
					if !strings.HasPrefix(resp, "HTTP/1.1 500 ") {
						t.Fatalf("response:\n%q", resp)
					}
					if strings.Contains(resp, "evil") || strings.Contains(resp, "never") {
						t.Errorf("the application's response leaked:\n%q", resp)
					}
				}
				lines := strings.Split(strings.TrimSpace(s.log.String()), "\n")
				if len(lines) != 3 {
					t.Errorf("%d log lines for 3 failures:\n%s", len(lines), s.log)
				}
				if !strings.Contains(lines[0], c.want) || !strings.Contains(lines[0], "Traceback") && c.attr == "raise_before" {
					t.Errorf("log line lacks %q:\n%s", c.want, lines[0])
				}
			})
		}
	})
}

func TestSlowViewHoldsOnlyItsThread(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "sleep", &wsgi.Options{Threads: 2})
		done := make(chan struct{})
		go func() {
			defer close(done)
			get(t, s.URL+"/?1.5")
		}()
		time.Sleep(200 * time.Millisecond) // let the slow request take its thread
		start := time.Now()
		if _, body := get(t, s.URL+"/?0"); body != "slept" {
			t.Errorf("body %q", body)
		}
		select {
		case <-done:
			t.Errorf("the quick request waited for the slow one (%v)", time.Since(start))
		default:
		}
		<-done
	})
}

func TestHeadAndNoContent(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "head", nil)
		resp, err := http.Head(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ContentLength != 1234 {
			t.Errorf("HEAD Content-Length = %d, want the application's 1234", resp.ContentLength)
		}
		nc := serve(t, fe, "no_content", nil)
		r, body := get(t, nc.URL)
		if r.StatusCode != 204 || body != "" || r.Header.Get("Content-Length") != "" {
			t.Errorf("204: %v %q %v", r.StatusCode, body, r.Header)
		}
	})
}

// TestHeadLength: a HEAD is answered with the Content-Length the
// application set, as it set it, whatever body it produced, or the length
// of the body it produced when it set none; with neither, none. No body
// byte follows the head. (wire.Length decides; both bridges render it.)
func TestHeadLength(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "sized", nil)
		addr := strings.TrimPrefix(s.URL, "http://")
		for _, c := range []struct {
			method, query string
			length        string // "" for no Content-Length
			body          string
		}{
			{"HEAD", "named=1234&body=0", "1234", ""},
			{"HEAD", "named=1234&body=1234", "1234", ""},
			{"HEAD", "named=1234&body=10", "1234", ""},
			{"HEAD", "named=0&body=10", "0", ""},
			{"HEAD", "body=5", "5", ""},
			{"HEAD", "body=0", "", ""},
			{"GET", "named=1234&body=3", "3", "xxx"}, // a whole body is sent with its own length
			{"GET", "body=0", "0", ""},
		} {
			t.Run(c.method+" "+c.query, func(t *testing.T) {
				resp := raw(t, addr, c.method+" /?"+c.query+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				head, body, _ := strings.Cut(resp, "\r\n\r\n")
				length := ""
				for _, line := range strings.Split(head, "\r\n")[1:] {
					if k, v, _ := strings.Cut(line, ": "); strings.EqualFold(k, "Content-Length") {
						length = v
					}
				}
				if !strings.HasPrefix(head, "HTTP/1.1 200 ") || length != c.length || body != c.body {
					t.Errorf("%q: Content-Length %q and body %q, want %q and %q", resp, length, body, c.length, c.body)
				}
			})
		}
	})
}

func TestWriteCallableAndBigBody(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "write", nil)
		if _, body := get(t, s.URL); body != "written;returned" {
			t.Errorf("body %q", body)
		}
		b := serve(t, fe, "big", nil)
		r, body := get(t, b.URL)
		if len(body) != 1<<20 || r.ContentLength != 1<<20 {
			t.Errorf("big body: %d bytes, Content-Length %d", len(body), r.ContentLength)
		}
	})
}

func TestNoPoolBuffersEverything(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "stream", &wsgi.Options{Threads: wsgi.NoPool})
		r, body := get(t, s.URL+"/?n=3")
		if r.ContentLength != int64(len(body)) || body != "part 0\npart 1\npart 2\n" {
			t.Errorf("no pool: Content-Length %d, body %q", r.ContentLength, body)
		}
	})
}

func TestMaxBody(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "environ", &wsgi.Options{Threads: wsgi.AutoThreads, MaxBody: 10})
		resp, err := http.Post(s.URL, "text/plain", strings.NewReader(strings.Repeat("x", 11)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d, want 413", resp.StatusCode)
		}
	})
}

// TestZeroOptionsAreTheDefaults: a zero field is its default, not off:
// Options naming only a ScriptName still cap a body at DefaultMaxBody, and
// NoMaxBody is the way to lift the cap.
func TestZeroOptionsAreTheDefaults(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		body := strings.Repeat("x", wsgi.DefaultMaxBody+1)
		for _, tt := range []struct {
			opts *wsgi.Options
			want int
		}{
			{nil, http.StatusRequestEntityTooLarge},
			{&wsgi.Options{ScriptName: "/x"}, http.StatusRequestEntityTooLarge},
			{&wsgi.Options{ScriptName: "/x", MaxBody: wsgi.NoMaxBody}, http.StatusOK},
		} {
			s := serve(t, fe, "environ", tt.opts)
			path := "/"
			if tt.opts != nil {
				path = "/x/"
			}
			resp, err := http.Post(s.URL+path, "text/plain", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%+v: status %d, want %d", tt.opts, resp.StatusCode, tt.want)
			}
		}
	})
}

func TestHeadOnEndlessStreamFreesItsThread(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "endless", &wsgi.Options{Threads: 1})
		for i := 0; i < 3; i++ {
			resp := raw(t, strings.TrimPrefix(s.URL, "http://"), "HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			if !strings.HasPrefix(resp, "HTTP/1.1 200") || strings.Contains(resp, "tick") {
				t.Fatalf("HEAD response:\n%q", resp)
			}
		}
	})
}

// TestClientLeavesWaitingStream: a client that leaves a stream whose
// generator waits for data, producing nothing, has the body closed (its
// finally runs, close() is called) and the thread back in the pool within a
// second, on both front ends.
func TestClientLeavesWaitingStream(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "waiting", &wsgi.Options{Threads: 1})
		var before struct{ Finally, Closed int }
		_, body := get(t, s.URL+"/state")
		json.Unmarshal([]byte(body), &before)
		c, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); line != "first\n" {
			t.Fatalf("first line %q", line)
		}
		time.Sleep(50 * time.Millisecond) // the generator waits
		c.Close()
		// One thread: the state is answered only once the stream gave it back.
		client := &http.Client{Timeout: time.Second}
		r, err := client.Get(s.URL + "/state")
		if err != nil {
			t.Fatalf("the thread was not back in the pool within a second: %v", err)
		}
		var after struct{ Finally, Closed int }
		json.NewDecoder(r.Body).Decode(&after)
		r.Body.Close()
		if after.Finally != before.Finally+1 || after.Closed != before.Closed+1 {
			t.Errorf("the body was not closed: %+v, then %+v", before, after)
		}
		if strings.Contains(s.log.String(), "GeneratorExit") {
			t.Errorf("the interrupt was logged as an application error:\n%s", s.log)
		}
	})
}

// noFlush is a logging middleware's ResponseWriter: it hides Flush.
type noFlush struct{ http.ResponseWriter }

func TestStreamBehindWriterWithoutFlush(t *testing.T) {
	dir, _ := filepath.Abs("testdata")
	app, err := m0.LoadApp("bridge:stream", &m0.LoadOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	h := wsgi.New(app, nil)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(noFlush{w}, r)
	}))
	defer s.Close()
	if _, body := get(t, s.URL+"/?n=3"); body != "part 0\npart 1\npart 2\n" {
		t.Errorf("body %q", body)
	}
}

func TestNewRefusesASGI(t *testing.T) {
	dir, _ := filepath.Abs("testdata")
	app, err := m0.LoadApp("hello:application", &m0.LoadOptions{Dir: dir, Protocol: "asgi"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "use asgi.New") {
			t.Errorf("wsgi.New of an ASGI application: panic %v", p)
		}
	}()
	wsgi.New(app, nil)
}

// TestShutdown: requests after Shutdown get 503, and a second Shutdown says
// so as every m0 handler's does.
func TestShutdown(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "environ", nil)
		if r, _ := get(t, s.URL); r.StatusCode != 200 {
			t.Fatalf("before: %d", r.StatusCode)
		}
		if err := s.h.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if r, body := get(t, s.URL); r.StatusCode != 503 || body != "Service Unavailable\n" {
			t.Errorf("after: %d %q", r.StatusCode, body)
		}
		err := s.h.Shutdown(context.Background())
		if err != wsgi.ErrClosed || !errors.Is(err, http.ErrServerClosed) || err.Error() != "wsgi: handler already shut down" {
			t.Errorf("a second Shutdown: %v", err)
		}
	})
}

// TestCutoff: a request waiting for a thread when Cutoff comes is
// answered 503 with Retry-After and Connection: close; the one running
// Python finishes; after it, one that finds the thread free runs.
func TestCutoff(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "sleep", &wsgi.Options{Threads: 1})
		done := make(chan string)
		go func() {
			_, body := get(t, s.URL+"/?1")
			done <- body
		}()
		time.Sleep(200 * time.Millisecond) // the slow request takes the one thread
		waiting := make(chan *http.Response)
		go func() {
			r, err := http.Get(s.URL + "/?0")
			if err != nil {
				t.Error(err)
				waiting <- nil
				return
			}
			r.Body.Close()
			waiting <- r
		}()
		time.Sleep(200 * time.Millisecond) // it waits for the thread
		s.h.Cutoff()
		r := <-waiting
		if r == nil || r.StatusCode != 503 || r.Header.Get("Retry-After") != "1" || !r.Close {
			t.Fatalf("the waiting request: %+v", r)
		}
		if body := <-done; body != "slept" {
			t.Errorf("the running one: %q", body)
		}
		if _, body := get(t, s.URL+"/?0"); body != "slept" {
			t.Errorf("a request that finds the thread free after the cut-off: %q", body)
		}
	})
}

func TestExcInfo(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "exc_keyword", nil)
		if r, body := get(t, s.URL); r.StatusCode != 500 || body != "own error page" {
			t.Errorf("exc_info as a keyword: %d %q", r.StatusCode, body)
		}
		s = serve(t, fe, "write_then_exc", nil)
		r, body := get(t, s.URL)
		if r.StatusCode != 500 || strings.Contains(body, "partial") || strings.Contains(body, "error page") {
			t.Errorf("start_response(exc_info) after write(): %d %q, want the server's own 500", r.StatusCode, body)
		}
		if !strings.Contains(s.log.String(), "KeyError") {
			t.Errorf("the re-raised error was not logged:\n%s", s.log)
		}
	})
}

func TestNoPoolIsOneThread(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "same_thread", &wsgi.Options{Threads: wsgi.NoPool})
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < 25; n++ {
					if r, body := get(t, s.URL+"/?"+url.QueryEscape(s.URL)); r.StatusCode != 200 || body != "1" {
						t.Errorf("%d %q: not the thread that made the connection", r.StatusCode, body)
						return
					}
				}
			}()
		}
		wg.Wait()
		if strings.Contains(s.log.String(), "ProgrammingError") {
			t.Errorf("log:\n%s", s.log)
		}
	})
}

func TestBodyAndCookieVerbatim(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "raw_body", nil)
		body := "--XyZ\r\nContent-Disposition: form-data; name=\"z_first\"\r\n\r\n1\r\n" +
			"--XyZ\r\nContent-Disposition: form-data; name=\"doc\"\r\nContent-Type: application/json\r\n\r\n{\"k\":1}\r\n" +
			"--XyZ\r\nContent-Disposition: form-data; name=\"a_second\"\r\n\r\n2\r\n--XyZ--\r\n"
		resp := raw(t, strings.TrimPrefix(s.URL, "http://"), "POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"+
			"Cookie: a=\"b c\"; d=e\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n"+
			"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		_, got, _ := strings.Cut(resp, "\r\n\r\n")
		if want := body + "|a=\"b c\"; d=e"; got != want {
			t.Errorf("the application saw\n%q\nwant\n%q", got, want)
		}
	})
}

// TestScriptName: mounted under a prefix, the application sees it as
// SCRIPT_NAME and the rest as PATH_INFO, so the links it builds carry the
// prefix; a path outside the prefix never reaches it.
func TestScriptName(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		s := serve(t, fe, "link", &wsgi.Options{Threads: 1, ScriptName: "/app/"})
		host := strings.TrimPrefix(s.URL, "http://")
		for _, c := range []struct {
			path, want string
			status     int
		}{
			{"/app/x/y", "/app|/x/y|http://" + host + "/app/x/y", 200},
			{"/app/", "/app|/|http://" + host + "/app/", 200},
			{"/app", "/app||http://" + host + "/app", 200},
			{"/app%2Fz", "/app|/z|http://" + host + "/app/z", 200},
			{"/apple", "", 404},
			{"/", "", 404},
			{"/other/app/x", "", 404},
		} {
			resp, body := get(t, s.URL+c.path)
			if resp.StatusCode != c.status || (c.status == 200 && body != c.want) {
				t.Errorf("%s: %d %q, want %d %q", c.path, resp.StatusCode, body, c.status, c.want)
			}
		}
	})
}

// TestSharedPool: two applications on one pool of one thread take turns
// (a request of the second waits while the first's runs), and shutting
// the pool down stops both.
func TestSharedPool(t *testing.T) {
	both(t, func(t *testing.T, fe string) {
		pool := wsgi.NewPool(1)
		slow := serve(t, fe, "mark", &wsgi.Options{Pool: pool, ScriptName: "/slow"})
		quick := serve(t, fe, "link", &wsgi.Options{Pool: pool, ScriptName: "/quick"})
		marks := filepath.Join(t.TempDir(), "marks")
		done := make(chan struct{})
		go func() {
			defer close(done)
			get(t, slow.URL+"/slow?"+marks)
		}()
		read := func() string { b, _ := os.ReadFile(marks); return string(b) }
		for deadline := time.Now().Add(10 * time.Second); read() == ""; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the slow request never started")
			}
		}
		// The slow request holds the one thread: the quick one waits for it.
		if resp, body := get(t, quick.URL+"/quick/x"); resp.StatusCode != 200 || !strings.HasPrefix(body, "/quick|/x|") {
			t.Errorf("quick: %d %q", resp.StatusCode, body)
		}
		if got := read(); got != "started\ndone\n" {
			t.Errorf("the quick request ran while the slow one held the shared thread (marks %q)", got)
		}
		<-done
		if err := pool.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{slow.URL + "/slow?0", quick.URL + "/quick/"} {
			if r, _ := get(t, u); r.StatusCode != 503 {
				t.Errorf("%s after the pool's shutdown: %d", u, r.StatusCode)
			}
		}
	})
}

// An idle keep-alive connection keeps the goroutine stack its request
// grew. Serving a page under fasthttp, as m0serve does, must fit in the
// 4 KiB a connection's goroutine reaches reading its request: at 8 KiB,
// every idle connection would hold 4 KiB more (serve keeps the call's
// frames off the path that writes the response).
func TestIdleConnectionKeepsASmallStack(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector's instrumentation makes every frame larger; the build m0serve ships is measured without it")
	}
	// One goroutine a connection, its stack 4,096 or 8,192 bytes.
	if stack := idleCost(t, "/")[0].Stack; stack > 6144 {
		t.Fatalf("an idle connection holds %.0f bytes of goroutine stack, want 4 KiB", stack)
	}
}

// A page's body does not stay on its connection once it is sent.
func TestIdleConnectionKeepsNoBody(t *testing.T) {
	s := serve(t, "fasthttp", "page", nil)
	testutil.KeepsNoBody(t, strings.TrimPrefix(s.URL, "http://"), "</p>\n", func(n int) string { return "/?" + strconv.Itoa(n) })
}

// idleCost serves the page at each path in turn under fasthttp to idle
// keep-alive connections (testutil.IdleCost).
func idleCost(t *testing.T, paths ...string) []testutil.IdleMem {
	s := serve(t, "fasthttp", "page", nil)
	return testutil.IdleCost(t, strings.TrimPrefix(s.URL, "http://"), "</p>\n", paths...)
}
