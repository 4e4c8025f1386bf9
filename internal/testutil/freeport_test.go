package testutil

import (
	"net"
	"strconv"
	"testing"
)

// FreePort gives a port a server can bind, outside the kernel's ephemeral
// range where that range leaves room below it, and not the same port twice
// in a row while the first is held.
func TestFreePort(t *testing.T) {
	lo, hi := belowEphemeral()
	seen := map[int]bool{}
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for range 20 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if hi > lo && (port < lo || port >= hi) {
			t.Fatalf("port %d is outside [%d, %d)", port, lo, hi)
		}
		if seen[port] {
			t.Fatalf("port %d given twice while held", port)
		}
		seen[port] = true
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("FreePort gave %d, which cannot be bound: %v", port, err)
		}
		held = append(held, ln)
	}
}
