//go:build linux && !race && !msan && !asan

package sock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/testutil"
)

// TestRawIO: reads and writes through RawIO carry bytes both ways, wait
// for readiness, end at the read deadline and at the peer's close, and
// fail with the errors of a TCPConn's own (a closed connection, a reset
// peer), without a signal for a write to a closed socket.
func TestRawIO(t *testing.T) {
	a, peer := testutil.TCPPair(t)
	c := NewRawIO(a)
	if _, ok := c.(*RawIO); !ok {
		t.Fatalf("a TCP connection came back as %T", c)
	}
	if tc, ok := Find[*net.TCPConn](c); !ok || tc == nil {
		t.Fatal("the TCP connection under RawIO is not found")
	}
	testRawIO(t, c, peer, "tcp")
}

// TestRawUnixIO is TestRawIO on a Unix socket's connection.
func TestRawUnixIO(t *testing.T) {
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := NewRawIO(a)
	if _, ok := c.(*RawUnixIO); !ok {
		t.Fatalf("a Unix socket's connection came back as %T", c)
	}
	if uc, ok := Find[*net.UnixConn](c); !ok || uc == nil {
		t.Fatal("the Unix connection under RawUnixIO is not found")
	}
	testRawIO(t, c, peer, "unix")
}

func testRawIO(t *testing.T, c, peer net.Conn, netw string) {

	// A read waits for bytes that come later.
	go func() {
		time.Sleep(50 * time.Millisecond)
		peer.Write([]byte("hello"))
	}()
	buf := make([]byte, 16)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("an empty read: %d %v", n, err)
	}
	if n, err := c.Write(nil); n != 0 || err != nil {
		t.Fatalf("an empty write: %d %v", n, err)
	}
	// A write larger than the socket's buffers waits while the peer reads,
	// and goes on where it stopped.
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i * 7 / 5)
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(big))
		n, _ := io.ReadFull(peer, b)
		got <- b[:n]
	}()
	if n, err := c.Write(big); err != nil || n != len(big) {
		t.Fatalf("wrote %d %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(big))
	}
	// The read deadline.
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	} else if oe, ok := err.(*net.OpError); !ok || oe.Op != "read" {
		t.Fatalf("the deadline's error is not a read's: %#v", err)
	}
	var ne net.Error
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a deadline's error is no net.Error timeout: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	// The peer's close reads as EOF; a write to it then fails with EPIPE
	// or a reset, and raises no signal.
	peer.Close()
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d %v", n, err)
	}
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = c.Write([]byte("after"))
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, syscall.ECONNRESET) {
		t.Fatalf("write to a closed peer: %v", werr)
	} else if oe, ok := werr.(*net.OpError); !ok || oe.Op != "write" || oe.Net != netw {
		t.Fatalf("the write's error is not a %s write's: %#v", netw, werr)
	}
	// A read or write on a closed connection is net.ErrClosed.
	c.Close()
	if _, err := c.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

// TestRawIOLeavesOthers: a connection that is neither TCP nor a Unix
// socket's is returned as it is.
func TestRawIOLeavesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if NewRawIO(a) != a {
		t.Fatal("a pipe was wrapped")
	}
}

// TestRawIOClosedWhileWaiting: a read waiting for bytes ends with
// net.ErrClosed when its connection closes.
func TestRawIOClosedWhileWaiting(t *testing.T) {
	a, _ := testutil.TCPPair(t)
	c := NewRawIO(a)
	ended := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 16))
		ended <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a read waiting at the close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read waiting at the close did not end")
	}
}
