package front

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/sock"
)

// TestFanSharesConnections: connections held open go to the loop with the
// fewest, in turn among equals; a closed one frees its loop.
func TestFanSharesConnections(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := newFan(ln, 2)
	done := make(chan struct{})
	go func() { f.run(); close(done) }()
	accepted := make(chan int, 8)
	type placed struct {
		net.Conn
		loop int
	}
	conns := make(chan placed, 8)
	for i, l := range f.loops {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				conns <- placed{c, i}
				accepted <- i
			}
		}()
	}
	dial := func() int {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		select {
		case i := <-accepted:
			return i
		case <-time.After(5 * time.Second):
			t.Fatal("no loop accepted the connection")
			return -1
		}
	}
	// Held open, two connections each: every pair is split.
	if got := []int{dial(), dial(), dial(), dial()}; got[0] == got[1] || got[2] == got[3] {
		t.Fatalf("loops %v, want each pair split", got)
	}
	// One closed: its loop has one open, the other two; the next
	// connection goes to it.
	first := <-conns
	first.Close()
	if got := dial(); got != first.loop {
		t.Fatalf("the next connection went to loop %d, not to the one with fewer open", got)
	}
	f.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("run did not end when the listener closed")
	}
	if _, err := f.loops[0].Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}

// flakyListener fails to accept a few times, as a process out of
// descriptors does, then hands out conn.
type flakyListener struct {
	net.Listener
	fails int
	conn  net.Conn
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	if l.conn != nil {
		c := l.conn
		l.conn = nil
		return c, nil
	}
	return l.Listener.Accept()
}

// TestFanRetriesAcceptFailures: a failure to accept is waited out, not
// the end of serving.
func TestFanRetriesAcceptFailures(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer b.Close()
	f := newFan(&flakyListener{Listener: ln, fails: 3, conn: a}, 2)
	go f.run()
	defer f.Close()
	got := make(chan net.Conn, 1)
	for _, l := range f.loops {
		go func() {
			if c, err := l.Accept(); err == nil {
				got <- c
			}
		}()
	}
	select {
	case c := <-got:
		if c.(*sock.CountedConn).Conn != a {
			t.Fatal("another connection was accepted")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("three failed accepts ended the fan")
	}
}
