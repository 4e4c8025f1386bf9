package front

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/strict"
	"github.com/valyala/fasthttp"
)

// TestServeStrict: a Go program's http.Server under ServeStrict refuses a
// request smuggled behind Content-Length and Transfer-Encoding before its
// handler, answers the request before it, and reads nothing after it.
func TestServeStrict(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 8)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		seen <- r.URL.Path
		io.WriteString(w, "ok\n")
	})}
	go ServeStrict(srv, ln)
	defer srv.Close()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	for i, want := range []int{200, 400} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("response %d: %d %q, want %d", i, resp.StatusCode, body, want)
		}
		if want == 400 && (!resp.Close || !strings.Contains(string(body), "both Content-Length and Transfer-Encoding")) {
			t.Fatalf("refusal: close %v, body %q", resp.Close, body)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal: %v, want the connection closed", err)
	}
	close(seen)
	var paths []string
	for p := range seen {
		paths = append(paths, p)
	}
	if strings.Join(paths, ",") != "/first" {
		t.Fatalf("the handler saw %v, want only /first", paths)
	}
}

type recorder struct {
	mu    sync.Mutex
	paths []string
	del   bool // delete every response header, as some handlers do
}

func (r *recorder) add(p string) { r.mu.Lock(); r.paths = append(r.paths, p); r.mu.Unlock() }
func (r *recorder) seen() string { r.mu.Lock(); defer r.mu.Unlock(); return strings.Join(r.paths, ",") }
func (r *recorder) ServeHTTP(w http.ResponseWriter, q *http.Request) {
	io.Copy(io.Discard, q.Body)
	r.add(q.URL.Path)
	if r.del {
		for k := range w.Header() {
			delete(w.Header(), k)
		}
	}
	io.WriteString(w, "ok\n")
}
func (r *recorder) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	r.add(string(ctx.Path()))
	ctx.SetBodyString("ok\n")
}

type netOnlyRec struct{ r *recorder }

func (n netOnlyRec) ServeHTTP(w http.ResponseWriter, q *http.Request) { n.r.ServeHTTP(w, q) }

func serveRec(t *testing.T, fe string, rec *recorder) string {
	var h http.Handler = rec
	if fe == "net/http" {
		h = netOnlyRec{rec}
	}
	srv := New(h, Limits{IdleTimeout: 5 * time.Second})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

const smuggled = "POST /smuggled HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"

// TestStrictOptionsStarUpgrade: an upgrade request the server answers
// itself (OPTIONS *) ends the hold, and the request after it is read
// strictly: one smuggled behind CL and TE never reaches the handler.
func TestStrictOptionsStarUpgrade(t *testing.T) {
	for _, fe := range []string{"fasthttp", "net/http"} {
		t.Run(fe, func(t *testing.T) {
			rec := &recorder{}
			c := dial(t, serveRec(t, fe, rec))
			io.WriteString(c, "OPTIONS * HTTP/1.1\r\nHost: x\r\nUpgrade: foo\r\nConnection: upgrade\r\n\r\n"+smuggled)
			br := bufio.NewReader(c)
			var got []int
			for i := 0; i < 2; i++ {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					break
				}
				io.Copy(io.Discard, resp.Body)
				got = append(got, resp.StatusCode)
			}
			if len(got) != 2 || got[0] != 200 || got[1] != 400 {
				t.Errorf("answers %v, want 200 then 400", got)
			}
			if strings.Contains(rec.seen(), "/smuggled") {
				t.Errorf("a request with both Content-Length and Transfer-Encoding reached the handler: %q", rec.seen())
			}
		})
	}
}

// TestStrictUpgradeHeadersCleared: an upgrade a handler answers without
// switching, whatever headers it sends, leaves what follows read strictly.
func TestStrictUpgradeHeadersCleared(t *testing.T) {
	rec := &recorder{del: true}
	c := dial(t, serveRec(t, "net/http", rec))
	io.WriteString(c, "GET /up HTTP/1.1\r\nHost: x\r\nUpgrade: foo\r\nConnection: upgrade\r\n\r\n"+smuggled)
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		io.Copy(io.Discard, resp.Body)
	}
	if strings.Contains(rec.seen(), "/smuggled") {
		t.Errorf("smuggled request reached the handler: %q", rec.seen())
	}
}

// TestStrictPipelinedUpgrade: an upgrade request pipelined behind another
// is answered too.
func TestStrictPipelinedUpgrade(t *testing.T) {
	for _, fe := range []string{"fasthttp", "net/http"} {
		t.Run(fe, func(t *testing.T) {
			rec := &recorder{}
			c := dial(t, serveRec(t, fe, rec))
			io.WriteString(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /up HTTP/1.1\r\nHost: x\r\nUpgrade: foo\r\nConnection: upgrade\r\n\r\n")
			br := bufio.NewReader(c)
			n := 0
			for ; n < 2; n++ {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					break
				}
				io.Copy(io.Discard, resp.Body)
			}
			if n != 2 {
				t.Errorf("got %d responses to 2 pipelined requests; handler saw %q", n, rec.seen())
			}
		})
	}
}

// TestStrictUnfinishedHeadNotUnused: a drain leaves a connection whose
// unfinished head the strict reading holds back: it is not unused.
func TestStrictUnfinishedHeadNotUnused(t *testing.T) {
	l0, _ := net.Listen("tcp4", "127.0.0.1:0")
	ll := Limits{}.Listener(strict.Listen(l0, 0)).(*limitListener)
	defer ll.Close()
	go func() {
		c, _ := net.Dial("tcp", l0.Addr().String())
		io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: x\r\n")
		time.Sleep(2 * time.Second)
		c.Close()
	}()
	sc, _ := ll.Accept()
	got := make(chan error, 1)
	go func() { _, err := sc.Read(make([]byte, 4096)); got <- err }()
	time.Sleep(UnusedGrace + 100*time.Millisecond)
	ll.closeQuiet()
	select {
	case err := <-got:
		t.Errorf("a connection that had sent %d bytes of a head was closed as unused: %v", len("POST /upload HTTP/1.1\r\nHost: x\r\n"), err)
	case <-time.After(300 * time.Millisecond):
	}
}

// switcher answers /up by switching protocols on net/http, then echoes
// what the client sends after the 101, as a WebSocket server would.
type switcher struct{ rec recorder }

func (s *switcher) add(p string) { s.rec.add(p) }

func (s *switcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.add(r.URL.Path)
	if r.URL.Path != "/up" {
		io.WriteString(w, "ok\n")
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	line, _ := brw.ReadString('\n')
	io.WriteString(c, line)
}

// TestStrictSwitch: after a 101, what the client sends is not HTTP and
// reaches the switched handler as sent, a request line included.
func TestStrictSwitch(t *testing.T) {
	sw := &switcher{}
	srv := New(sw, Limits{IdleTimeout: 5 * time.Second})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	c := dial(t, ln.Addr().String())
	io.WriteString(c, "GET /up HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: upgrade\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("switch: %v %v", resp, err)
	}
	io.WriteString(c, "GET /x HTTP/9.9\n")
	if line, err := br.ReadString('\n'); err != nil || line != "GET /x HTTP/9.9\n" {
		t.Fatalf("echo after the switch: %q %v", line, err)
	}
}
