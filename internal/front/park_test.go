package front

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// parkServer serves a fresh echo with New under fasthttp within lim, and
// returns its address and the server.
func parkServer(t *testing.T, lim Limits) (string, *limitedServer) {
	t.Helper()
	srv := New(newEcho(), lim).(*limitedServer)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ln.Addr().String(), srv
}

// outOfFasthttp waits until fasthttp serves no connection, every one open
// having left it idle, and fails the test if that takes 5 s (it takes
// microseconds: the bound is for a machine stalled under load).
func outOfFasthttp(t *testing.T, srv *limitedServer) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); srv.park.GetOpenConnectionsCount() != 0; {
		if time.Now().After(end) {
			t.Fatalf("fasthttp still serves %d connections", srv.park.GetOpenConnectionsCount())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answer reads one response from br and returns its status and body.
func answer(t *testing.T, br *bufio.Reader) (int, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// answered dials addr, has one GET answered 200 on the connection and waits
// until it has left fasthttp; the connection is closed when the test ends.
func answered(t *testing.T, addr string, srv *limitedServer) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := dial(t, addr)
	br := bufio.NewReader(c)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if st, body := answer(t, br); st != 200 || body != "0" {
		t.Fatalf("first answer %d %q", st, body)
	}
	outOfFasthttp(t, srv)
	return c, br
}

// An idle kept-alive connection leaves fasthttp after its first answer and
// is served again when its next request comes: a plain one, two pipelined
// in one write, a body, and an upgrade request answered without switching,
// whose hold in the strict reading must end with its answer (fasthttp
// numbers the requests of a connection that came back from 1 again) so
// that the request after it is read.
func TestIdleConnectionLeavesFasthttp(t *testing.T) {
	addr, srv := parkServer(t, Limits{IdleTimeout: 5 * time.Second})
	c, br := answered(t, addr, srv)
	get := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	if st, body := answer(t, br); st != 200 || body != "5" {
		t.Fatalf("after coming back: %d %q", st, body)
	}
	io.WriteString(c, get+"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
	for _, want := range []string{"0", "3"} {
		if st, body := answer(t, br); st != 200 || body != want {
			t.Fatalf("pipelined: %d %q, want %q", st, body, want)
		}
	}

	// A second leave comes only after a wait of parkGap or more.
	time.Sleep(parkGap + 100*time.Millisecond)
	io.WriteString(c, get)
	if st, _ := answer(t, br); st != 200 {
		t.Fatalf("after a long wait: %d", st)
	}
	outOfFasthttp(t, srv)

	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	if st, _ := answer(t, br); st != 200 {
		t.Fatalf("upgrade request: %d", st)
	}
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
	if st, body := answer(t, br); st != 200 || body != "2" {
		t.Fatalf("after the upgrade request: %d %q", st, body)
	}
}

// Under load a connection leaves once, at its first wait, and stays in
// fasthttp through waits shorter than parkGap.
func TestBusyConnectionStays(t *testing.T) {
	addr, srv := parkServer(t, Limits{IdleTimeout: 5 * time.Second})
	c := dial(t, addr)
	br := bufio.NewReader(c)
	for i := range 50 {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if st, _ := answer(t, br); st != 200 {
			t.Fatalf("request %d: %d", i, st)
		}
		if i == 0 {
			outOfFasthttp(t, srv)
		}
	}
	if n := srv.park.GetOpenConnectionsCount(); n != 1 {
		t.Fatalf("fasthttp serves %d connections, want the busy one", n)
	}
}

// A connection out of fasthttp is still closed at its idle timeout, and by
// a drain.
func TestLeftConnectionCloses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		idle  time.Duration
		drain bool
	}{{"idle timeout", 300 * time.Millisecond, false}, {"drain", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			addr, srv := parkServer(t, Limits{IdleTimeout: tc.idle})
			_, br := answered(t, addr, srv)
			start := time.Now()
			if tc.drain {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				if err := srv.Shutdown(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("read %v, want the server's close", err)
			}
			if took := time.Since(start); took > 4*time.Second {
				t.Fatalf("closed after %v", took)
			}
		})
	}
}

// With --max-keepalive-requests, which fasthttp counts per serving, no
// connection leaves: the connection closes after its third answer.
func TestCountedConnectionStays(t *testing.T) {
	addr, srv := parkServer(t, Limits{IdleTimeout: 5 * time.Second, MaxKeepaliveRequests: 3})
	if srv.park != nil {
		t.Fatal("a server counting requests per connection lets connections leave")
	}
	c := dial(t, addr)
	br := bufio.NewReader(c)
	for i := range 3 {
		time.Sleep(20 * time.Millisecond) // each answer's wait long enough to leave, were it to
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if st, _ := answer(t, br); st != 200 {
			t.Fatalf("request %d: %d", i+1, st)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the third answer: %v, want the server's close", err)
	}
}

// conns is how many connections the server holds open.
func conns(srv *limitedServer) int {
	l := srv.ln.Load().(*limitListener)
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// A client that closes a connection out of fasthttp has it closed, at once
// (it came back after a long wait, and left again: a connection that came
// back leaves again only after a request).
func TestLeftConnectionClosedByClient(t *testing.T) {
	addr, srv := parkServer(t, Limits{IdleTimeout: 30 * time.Second})
	c, br := answered(t, addr, srv)
	time.Sleep(parkGap + 100*time.Millisecond)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if st, _ := answer(t, br); st != 200 {
		t.Fatalf("answer %d", st)
	}
	outOfFasthttp(t, srv)
	c.Close()
	for end := time.Now().Add(5 * time.Second); conns(srv) != 0; {
		if time.Now().After(end) {
			t.Fatalf("%d connections still open after the client closed", conns(srv))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A connection that came back and whose next head does not come whole
// within the idle timeout is closed with no answer, as a kept-alive one that
// never left is.
func TestCameBackHeadTimeout(t *testing.T) {
	const idle = 500 * time.Millisecond
	addr, srv := parkServer(t, Limits{IdleTimeout: idle})
	c, br := answered(t, addr, srv)
	io.WriteString(c, "GET / HTTP/1.1\r\n")
	start := time.Now()
	if b, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("read %q %v, want a close with no answer", b, err)
	}
	if took := time.Since(start); took > 10*idle { // the idle timeout, not a later one
		t.Fatalf("closed after %v", took)
	}
}

// A drain whose time runs out closes the connections waiting out of
// fasthttp, which fasthttp's own shutdown does not see.
func TestShutdownClosesWaiting(t *testing.T) {
	addr, srv := parkServer(t, Limits{IdleTimeout: 30 * time.Second})
	c, br := answered(t, addr, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // under KeptGrace
	defer cancel()
	srv.Shutdown(ctx)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("read %v after the drain, want the server's close", err)
	}
}
