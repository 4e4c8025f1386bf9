package sock

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// failing is a listener whose first fails Accepts fail as accept4 does
// out of descriptors, until it is closed.
type failing struct {
	net.Listener
	mu     sync.Mutex
	fails  int
	calls  int
	closed bool
}

func (l *failing) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.calls++
	fail := l.fails > 0 && !l.closed
	if fail {
		l.fails--
	}
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func (l *failing) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.Listener.Close()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// logLines is a logger and what it wrote, one line per record.
func logLines() (*slog.Logger, func() []string) {
	var mu sync.Mutex
	var b bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return b.Write(p)
	})
	return slog.New(slog.NewTextHandler(w, nil)), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Split(strings.TrimSpace(b.String()), "\n")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestAcceptRetry(t *testing.T) {
	t.Parallel()
	ln := &failing{Listener: listen(t), fails: 6}
	log, lines := logLines()
	r := AcceptRetry{Logger: log}
	go func() {
		if c, err := net.Dial("tcp4", ln.Addr().String()); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	start := time.Now()
	c, err := r.Accept(ln, nil)
	if err != nil {
		t.Fatalf("Accept after 6 failures: %v", err)
	}
	c.Close()
	took := time.Since(start)
	if ln.calls != 7 {
		t.Errorf("%d calls to Accept, want 7", ln.calls)
	}
	// At most one line per LogEvery: the first failure's, then one a
	// LogEvery later at the soonest.
	got := lines()
	if max := 1 + int(took/LogEvery); len(got) < 1 || len(got) > max {
		t.Fatalf("%d lines in %v, want 1 to %d: %q", len(got), took, max, got)
	}
	if !strings.Contains(got[0], "too many open files") || !strings.Contains(got[0], "failures=1") {
		t.Errorf("first line %q", got[0])
	}
}

func TestAcceptRetryEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(ln net.Listener, closed chan struct{})
	}{
		{"closed channel", func(_ net.Listener, closed chan struct{}) { close(closed) }},
		{"listener closed", func(ln net.Listener, _ chan struct{}) { ln.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln := &failing{Listener: listen(t), fails: 1 << 30}
			log, _ := logLines()
			r := AcceptRetry{Logger: log}
			closed := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := r.Accept(ln, closed)
				done <- err
			}()
			for {
				ln.mu.Lock()
				calls := ln.calls
				ln.mu.Unlock()
				if calls >= 3 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			tc.end(ln, closed)
			if err := <-done; !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Accept returned %v, want net.ErrClosed", err)
			}
		})
	}
}

// TestMerge: one listener for two, a TCP one and a unix one; a connection
// accepted below before Close is still returned by Accept after it.
func TestMerge(t *testing.T) {
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := net.Listen("unix", filepath.Join(t.TempDir(), "m.sock"))
	if err != nil {
		t.Fatal(err)
	}
	m := Merge(a, b)
	if m.Addr() != a.Addr() {
		t.Errorf("Addr %v, want the first's", m.Addr())
	}
	if Merge(a) != a {
		t.Error("Merge of one is not itself")
	}
	seen := map[string]bool{}
	for _, ln := range []net.Listener{a, b} {
		c, err := net.Dial(ln.Addr().Network(), ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got, err := m.Accept()
		if err != nil {
			t.Fatal(err)
		}
		seen[got.LocalAddr().Network()] = true
		got.Close()
	}
	if !seen["tcp"] || !seen["unix"] {
		t.Errorf("accepted from %v", seen)
	}
	// Accepted below, not yet by the server: Close keeps it for Accept.
	c, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(m.(*merged).conns) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	m.Close()
	got, err := m.Accept()
	if err != nil {
		t.Fatalf("the connection accepted before Close: %v", err)
	}
	got.Close()
	if _, err := m.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("after: %v", err)
	}
	if _, err := net.Dial("tcp", a.Addr().String()); err == nil {
		t.Error("the listener below is still open")
	}
}

// held is a wrapper holding bytes it read, as the strict reading and a
// handed-off connection do; under is a wrapper between.
type held struct {
	net.Conn
	n int
}

func (h *held) Held() bool                            { return h.n > 0 }
func (h *held) NetConn() net.Conn                     { return h.Conn }
func (h *held) SyscallConn() (syscall.RawConn, error) { return RawConn(h.Conn) }

type under struct{ net.Conn }

func (u *under) NetConn() net.Conn                     { return u.Conn }
func (u *under) SyscallConn() (syscall.RawConn, error) { return RawConn(u.Conn) }

// Pending sees bytes held by any wrapper of the chain, not only the top
// one that holds some, and bytes on the socket.
func TestPending(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	bottom := &held{Conn: server}
	top := &held{Conn: &under{Conn: bottom}}
	if Pending(top) {
		t.Fatal("pending with nothing held or sent")
	}
	bottom.n = 1
	if !Pending(top) {
		t.Fatal("bytes held under a wrapper holding none are not pending")
	}
	bottom.n = 0
	client.Write([]byte("x"))
	for end := time.Now().Add(2 * time.Second); !Pending(top); {
		if time.Now().After(end) {
			t.Fatal("a byte on the socket is not pending")
		}
		time.Sleep(time.Millisecond)
	}
}
