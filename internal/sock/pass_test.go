//go:build linux

package sock

import (
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

func corked(t *testing.T, c net.Conn) int {
	t.Helper()
	v := -1
	if err := WithFD(c, func(fd uintptr) { v, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK) }); err != nil {
		t.Fatal(err)
	}
	return v
}

// Cork sets TCP_CORK on the connection's own descriptor, through a
// wrapper, and its uncork clears it; on a connection without a
// descriptor it does nothing.
func TestCork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var open atomic.Int64
	open.Add(1)
	c := Counted(raw, &open)
	if got := corked(t, c); got != 0 {
		t.Fatalf("TCP_CORK before Cork: %d", got)
	}
	uncork := Cork(c)
	if got := corked(t, c); got == 0 {
		t.Fatal("TCP_CORK not set by Cork")
	}
	uncork()
	if got := corked(t, c); got != 0 {
		t.Fatalf("TCP_CORK after uncork: %d", got)
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	Cork(a)() // no descriptor: nothing to do, and no panic
}
