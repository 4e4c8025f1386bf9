package front

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/testutil"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// echo is a FastHandler that answers with the length of the body it got.
// At /big it sends an endless response and reports on done when that ends.
type echo struct {
	calls atomic.Int32
	done  chan struct{}
}

func newEcho() *echo { return &echo{done: make(chan struct{}, 1)} }

func (e *echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.calls.Add(1)
	if r.URL.Path == "/wait" {
		time.Sleep(1200 * time.Millisecond)
	}
	if r.URL.Path == "/big" {
		defer func() { e.done <- struct{}{} }()
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
	b, _ := io.ReadAll(r.Body)
	io.WriteString(w, strconv.Itoa(len(b)))
}

func (e *echo) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	e.calls.Add(1)
	if string(ctx.Path()) == "/wait" {
		time.Sleep(1200 * time.Millisecond)
	}
	if string(ctx.Path()) == "/big" {
		ctx.SetBodyStream(&endless{done: e.done}, -1)
		return
	}
	ctx.SetBodyString(strconv.Itoa(len(ctx.PostBody())))
}

// endless is a response body that never ends.
type endless struct{ done chan struct{} }

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func (e *endless) Close() error {
	e.done <- struct{}{}
	return nil
}

// netOnly hides ServeFastHTTP, so New serves with net/http.
type netOnly struct{ e *echo }

func (n netOnly) ServeHTTP(w http.ResponseWriter, r *http.Request) { n.e.ServeHTTP(w, r) }

var servers = []string{"fasthttp", "net/http"}

// trackListener reports each connection it accepted when it is closed.
type trackListener struct {
	net.Listener
	closes chan struct{}
}

func (l *trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &trackConn{Conn: c, closes: l.closes}, nil
}

type trackConn struct {
	net.Conn
	closes chan struct{}
	once   sync.Once
}

func (c *trackConn) Close() error {
	c.once.Do(func() { c.closes <- struct{}{} })
	return c.Conn.Close()
}

func (c *trackConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

// limitsServer serves e within lim under the server fe and returns its
// address, the refusal lines it printed, and a channel that receives as
// each connection closes on the server's side.
func limitsServer(t *testing.T, fe string, e *echo, lim Limits) (string, func() []string, chan struct{}) {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	lim.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}
	var h http.Handler = e
	if fe == "net/http" {
		h = netOnly{e}
	}
	srv := New(h, lim)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &trackListener{Listener: l, closes: make(chan struct{}, 16)}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		ln.Close()
	})
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}, ln.closes
}

// each runs body under both servers.
func each(t *testing.T, body func(t *testing.T, fe string)) {
	for _, fe := range servers {
		t.Run(fe, func(t *testing.T) {
			t.Parallel()
			body(t, fe)
		})
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// closed reports whether the server closes c within d, reading and
// discarding whatever comes first.
func closed(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !isTimeout(err)
}

func TestMaxBody(t *testing.T) {
	const limit = 1000
	tests := []struct {
		name    string
		head    string
		body    string
		status  int
		handled bool
	}{
		{"under the cap", "Content-Length: 1000\r\n", strings.Repeat("a", 1000), 200, true},
		{"length over the cap, whole body written first", "Content-Length: 2097152\r\n", strings.Repeat("a", 2<<20), 413, false},
		{"length over the cap, expecting 100-continue", "Content-Length: 2097152\r\nExpect: 100-continue\r\n", "", 413, false},
		{"chunked under the cap", "Transfer-Encoding: chunked\r\n", chunked(10, 100), 200, true},
		{"chunked over the cap", "Transfer-Encoding: chunked\r\n", chunked(2048, 1024), 413, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			each(t, func(t *testing.T, fe string) {
				e := newEcho()
				addr, _, _ := limitsServer(t, fe, e, Limits{MaxBody: limit, IdleTimeout: 2 * time.Second})
				c := dial(t, addr)
				// The whole request goes out before anything is read, as
				// http.client and requests send it.
				if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\n"+tt.head+"\r\n"+tt.body); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tt.status {
					t.Fatalf("status %d %q, want %d", resp.StatusCode, b, tt.status)
				}
				if got := e.calls.Load() > 0; got != tt.handled {
					t.Fatalf("handler called: %v, want %v", got, tt.handled)
				}
				if tt.status == 413 {
					if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
						t.Errorf("Content-Type %q, want text/plain", ct)
					}
					if !resp.Close {
						t.Error("413 without Connection: close")
					}
					if !closed(c, 5*time.Second) {
						t.Error("connection still open after the 413")
					}
				}
			})
		})
	}
}

// chunked is n chunks of size bytes each, then the last chunk.
func chunked(n, size int) string {
	var b strings.Builder
	for range n {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", size, strings.Repeat("b", size))
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

func TestRefusalLoggedOnce(t *testing.T) {
	each(t, func(t *testing.T, fe string) {
		addr, lines, _ := limitsServer(t, fe, newEcho(), Limits{MaxBody: 10, BodyTimeout: 300 * time.Millisecond, IdleTimeout: time.Second})
		for range 2 {
			c := dial(t, addr)
			io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 413 {
				t.Fatalf("%v %v, want 413", resp, err)
			}
		}
		for range 2 {
			c := dial(t, addr)
			io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhi")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 408 {
				t.Fatalf("%v %v, want 408", resp, err)
			}
		}
		want := []string{
			"m0serve: refused a request body over --max-body 10 with 413 (raise --max-body or M0_MAX_BODY)",
			"m0serve: refused a request body still arriving 300ms after its headers with 408 (raise --body-timeout or M0_BODY_TIMEOUT)",
		}
		if got := lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

func TestBodyTimeout(t *testing.T) {
	tests := []struct {
		name  string
		head  string
		sent  string
		first bool // the stalled request is the connection's first
	}{
		{"length, first request", "Content-Length: 100\r\n", "partial", true},
		{"chunked, first request", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n", true},
		{"length, second request", "Content-Length: 100\r\n", "partial", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			each(t, func(t *testing.T, fe string) {
				e := newEcho()
				addr, _, _ := limitsServer(t, fe, e, Limits{BodyTimeout: 300 * time.Millisecond, IdleTimeout: 5 * time.Second})
				c := dial(t, addr)
				br := bufio.NewReader(c)
				if !tt.first {
					io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
					resp, err := http.ReadResponse(br, nil)
					if err != nil || resp.StatusCode != 200 {
						t.Fatalf("%v %v, want 200", resp, err)
					}
					io.Copy(io.Discard, resp.Body)
				}
				start := time.Now()
				io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\n"+tt.head+"\r\n"+tt.sent)
				resp, err := http.ReadResponse(br, nil)
				took := time.Since(start)
				if err != nil || resp.StatusCode != 408 {
					t.Fatalf("%v %v, want 408", resp, err)
				}
				io.Copy(io.Discard, resp.Body)
				if took < 300*time.Millisecond || took > 4*time.Second {
					t.Errorf("refused after %v, want about 300ms", took)
				}
				if !closed(c, 2*time.Second) {
					t.Error("connection still open after the refusal")
				}
				if want := int32(1 - btoi(tt.first)); e.calls.Load() != want {
					t.Errorf("handler called %d times, want %d", e.calls.Load(), want)
				}
			})
		})
	}
}

func btoi(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

func TestIdleTimeout(t *testing.T) {
	each(t, func(t *testing.T, fe string) {
		addr, _, _ := limitsServer(t, fe, newEcho(), Limits{IdleTimeout: 300 * time.Millisecond})
		tests := []struct {
			name    string
			request bool // one request first, then idle
		}{
			{"new connection", false},
			{"kept-alive connection", true},
		}
		for _, tt := range tests {
			c := dial(t, addr)
			br := bufio.NewReader(c)
			if tt.request {
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(br, nil)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("%s: %v %v", tt.name, resp, err)
				}
				io.Copy(io.Discard, resp.Body)
			}
			start := time.Now()
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if _, err := br.ReadByte(); err == nil || isTimeout(err) {
				t.Fatalf("%s: %v, want a close", tt.name, err)
			}
			if took := time.Since(start); took < 250*time.Millisecond {
				t.Errorf("%s: closed after %v, want about 300ms", tt.name, took)
			}
		}
	})
}

// TestHeadTimeout: a request's line and headers arrive within IdleTimeout
// of a new connection's accept, or of their first byte on a kept-alive
// one (once a head: bytes trickling in do not extend it), however long the
// connection idled before it or its answer took.
func TestHeadTimeout(t *testing.T) {
	const idle = time.Second
	each(t, func(t *testing.T, fe string) {
		addr, _, _ := limitsServer(t, fe, newEcho(), Limits{IdleTimeout: idle})
		answer := func(br *bufio.Reader) {
			t.Helper()
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v, want 200", resp, err)
			}
			io.Copy(io.Discard, resp.Body)
		}
		// shut wants c closed between 0.85 and 2 idle waits after start.
		shut := func(c net.Conn, br *bufio.Reader, start time.Time, name string) {
			t.Helper()
			c.SetReadDeadline(time.Now().Add(4 * idle))
			if _, err := br.ReadByte(); err == nil || isTimeout(err) {
				t.Fatalf("%s: %v, want a close", name, err)
			}
			if took := time.Since(start); took < idle*85/100 || took > 2*idle {
				t.Errorf("%s: closed after %v, want about %v", name, took, idle)
			}
		}
		kept := func() (net.Conn, *bufio.Reader) {
			c := dial(t, addr)
			br := bufio.NewReader(c)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			answer(br)
			time.Sleep(idle * 3 / 10)
			return c, br
		}

		c := dial(t, addr)
		br := bufio.NewReader(c)
		start := time.Now()
		io.WriteString(c, "GET / HTTP/1.1\r\n")
		shut(c, br, start, "new connection")

		// Bounded from the head's first byte, not from the answer before
		// it (which would close it 0.7 idle waits after the head began).
		c, br = kept()
		start = time.Now()
		io.WriteString(c, "GET / HTTP/1.1\r\n")
		shut(c, br, start, "kept-alive connection")

		c, br = kept()
		start = time.Now()
		io.WriteString(c, "GET / HTTP/1.1\r\n")
		stop := make(chan struct{})
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(idle / 10):
				}
				if _, err := fmt.Fprintf(c, "X-%d: a\r\n", i); err != nil {
					return
				}
			}
		}()
		shut(c, br, start, "a head trickling in")
		close(stop)

		// A head read ahead while the request before it was answered (for
		// longer than IdleTimeout): its bound starts with the answer.
		c = dial(t, addr)
		br = bufio.NewReader(c)
		io.WriteString(c, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\n")
		answer(br)
		time.Sleep(idle / 10)
		io.WriteString(c, "Host: x\r\n\r\n")
		answer(br)
	})
}

// TestBodyDeadlineReplaced: with no idle bound, a body's deadline does not
// outlive its request: the connection waits for the next one unbounded.
func TestBodyDeadlineReplaced(t *testing.T) {
	each(t, func(t *testing.T, fe string) {
		addr, _, _ := limitsServer(t, fe, newEcho(), Limits{BodyTimeout: 200 * time.Millisecond})
		c := dial(t, addr)
		br := bufio.NewReader(c)
		for i, req := range []string{
			"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok",
			"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		} {
			if i > 0 {
				time.Sleep(400 * time.Millisecond) // twice the body's bound
			}
			io.WriteString(c, req)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("request %d: %v %v, want 200", i+1, resp, err)
			}
			io.Copy(io.Discard, resp.Body)
		}
	})
}

func TestStalledReader(t *testing.T) {
	each(t, func(t *testing.T, fe string) {
		e := newEcho()
		addr, _, closes := limitsServer(t, fe, e, Limits{IdleTimeout: 300 * time.Millisecond})
		c := dial(t, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(4096)
		}
		io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		// The client reads nothing: the server's send stops progressing.
		select {
		case <-e.done:
		case <-time.After(5 * time.Second):
			t.Fatal("the response's writer still blocked 5s into a stalled send")
		}
		// The client, reading nothing, cannot see the close yet: the
		// server's side reports it.
		select {
		case <-closes:
		case <-time.After(5 * time.Second):
			t.Fatal("connection still open on the server's side")
		}
	})
}

func TestSteadyReader(t *testing.T) {
	each(t, func(t *testing.T, fe string) {
		e := newEcho()
		addr, _, _ := limitsServer(t, fe, e, Limits{IdleTimeout: 300 * time.Millisecond})
		c := dial(t, addr)
		io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		// A slow reader that keeps reading is never cut off, however long
		// the response takes.
		buf := make([]byte, 32<<10)
		end := time.Now().Add(time.Second)
		for time.Now().Before(end) {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Read(buf); err != nil {
				t.Fatalf("read: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestMaxKeepaliveRequests(t *testing.T) {
	each(t, func(t *testing.T, fe string) {
		addr, _, _ := limitsServer(t, fe, newEcho(), Limits{MaxKeepaliveRequests: 3, IdleTimeout: 5 * time.Second})
		c := dial(t, addr)
		br := bufio.NewReader(c)
		for i := 1; i <= 3; i++ {
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			if resp.Close != (i == 3) {
				t.Fatalf("request %d: Connection: close %v", i, resp.Close)
			}
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("after the third response: %v, want EOF", err)
		}
	})
}

func TestFormatSize(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{4 << 20, "4m"}, {512 << 10, "512k"}, {1 << 30, "1g"}, {1000, "1000"}, {1536 << 10, "1536k"}} {
		if got := wire.FormatSize(tt.n); got != tt.want {
			t.Errorf("wire.FormatSize(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestReadFromFile: a file sent through a limited connection goes whole to
// a client that reads, by the socket's own ReadFrom (sendfile), and a send
// to a client that stops reading fails after the idle bound.
// TestLimitConnKeepsAnExplicitDeadline: a write deadline the caller sets
// is the one its writes run under; clearing it brings the window back.
func TestLimitConnKeepsAnExplicitDeadline(t *testing.T) {
	s, c := testutil.TCPPair(t)
	c.(*net.TCPConn).SetReadBuffer(4096)
	lc := &limitConn{Conn: s, send: sock.SendWindow{Window: 10 * time.Second}}
	lc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	big := make([]byte, 64<<20) // more than the socket buffers take
	start := time.Now()
	if _, err := lc.Write(big); !isTimeout(err) {
		t.Fatalf("a write to a client that reads nothing: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the write ran %v: the window replaced the caller's deadline", d)
	}
	lc.SetWriteDeadline(time.Time{})
	if lc.explicit.Load() {
		t.Fatal("clearing the deadline left it explicit")
	}
}

func TestReadFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("reading client", func(t *testing.T) {
		s, c := testutil.TCPPair(t)
		lc := &limitConn{Conn: s, send: sock.SendWindow{Window: 300 * time.Millisecond}}
		got := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(c)
			got <- b
		}()
		f, _ := os.Open(path)
		defer f.Close()
		n, err := lc.ReadFrom(f)
		if err != nil || n != int64(len(data)) {
			t.Fatalf("ReadFrom: %d, %v", n, err)
		}
		s.Close()
		if b := <-got; !bytes.Equal(b, data) {
			t.Fatalf("the client got %d bytes, not the file", len(b))
		}
	})
	t.Run("stalled client", func(t *testing.T) {
		s, c := testutil.TCPPair(t)
		c.(*net.TCPConn).SetReadBuffer(4096)
		lc := &limitConn{Conn: s, send: sock.SendWindow{Window: 300 * time.Millisecond}}
		f, _ := os.Open(path)
		defer f.Close()
		start := time.Now()
		n, err := lc.ReadFrom(f)
		if err == nil || !isTimeout(err) {
			t.Fatalf("ReadFrom to a client that reads nothing: %d, %v", n, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("it took %v to give up", d)
		}
	})
}

// TestLimitConnReadDeadline: the read deadline asked for is the one a read
// keeps, though the socket's is set only when it must be: one moved later
// or cleared does not end a read at the earlier time, and one asked for
// ends it at its time.
func TestLimitConnReadDeadline(t *testing.T) {
	s, c := testutil.TCPPair(t)
	lc := &limitConn{Conn: s}
	buf := make([]byte, 8)
	readAfter := func(d time.Duration) (time.Duration, error) {
		go func() {
			time.Sleep(d)
			c.Write([]byte("x"))
		}()
		start := time.Now()
		_, err := lc.Read(buf)
		return time.Since(start), err
	}

	lc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	lc.SetReadDeadline(time.Now().Add(2 * time.Second)) // later: the socket keeps 100 ms
	if _, err := readAfter(300 * time.Millisecond); err != nil {
		t.Fatalf("a deadline moved later ended the read at the earlier one: %v", err)
	}
	lc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	lc.SetReadDeadline(time.Time{}) // none: the socket keeps 100 ms
	if _, err := readAfter(300 * time.Millisecond); err != nil {
		t.Fatalf("a cleared deadline ended the read: %v", err)
	}
	lc.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	took, err := readAfter(2 * time.Second)
	if !isTimeout(err) || took < 140*time.Millisecond || took > time.Second {
		t.Fatalf("a deadline 150 ms ahead: %v after %v", err, took)
	}
	lc.SetReadDeadline(time.Now().Add(time.Hour))
	lc.SetReadDeadline(time.Now().Add(150 * time.Millisecond)) // earlier: set at once
	took, err = readAfter(2 * time.Second)
	if !isTimeout(err) || took > time.Second {
		t.Fatalf("a deadline moved earlier: %v after %v", err, took)
	}
	io.ReadFull(lc, buf[:1]) // the byte sent meanwhile, under no deadline yet
}

// TestRequestStartKeepsItsMarkPastContinue: a request's start is when its
// first bytes arrived, its body's arrival after a 100 Continue
// notwithstanding; the next request, after the final answer, has its own.
func TestRequestStartKeepsItsMarkPastContinue(t *testing.T) {
	s, c := testutil.TCPPair(t)
	lc := &limitConn{Conn: s}
	buf := make([]byte, 64)
	read := func(msg string) {
		c.Write([]byte(msg))
		if _, err := lc.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	go io.Copy(io.Discard, c)
	read("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
	first := lc.RequestStart()
	lc.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n"))
	time.Sleep(10 * time.Millisecond)
	read("body")
	if got := lc.RequestStart(); !got.Equal(first) {
		t.Fatalf("the body after 100 Continue moved the start by %v", got.Sub(first))
	}
	lc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	time.Sleep(10 * time.Millisecond)
	read("GET / HTTP/1.1\r\n\r\n")
	if !lc.RequestStart().After(first) {
		t.Fatal("the next request kept the first one's start")
	}
}
