//go:build linux

package sock

import (
	"syscall"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/testutil"
	"golang.org/x/sys/unix"
)

func TestKeepAlive(t *testing.T) {
	server, _ := testutil.TCPPair(t)
	if err := KeepAlive(server, 7*time.Second); err != nil {
		t.Fatal(err)
	}
	raw, err := server.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	raw.Control(func(fd uintptr) {
		for name, o := range map[string][2]int{
			"SO_KEEPALIVE":     {unix.SOL_SOCKET, unix.SO_KEEPALIVE},
			"TCP_KEEPIDLE":     {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
			"TCP_KEEPINTVL":    {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
			"TCP_KEEPCNT":      {unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
			"TCP_USER_TIMEOUT": {unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT},
		} {
			got[name], _ = unix.GetsockoptInt(int(fd), o[0], o[1])
		}
	})
	// Unacknowledged data is given as long as the probes: 7 s + 3 x 7 s.
	want := map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 7, "TCP_KEEPINTVL": 7, "TCP_KEEPCNT": 3, "TCP_USER_TIMEOUT": 28000}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
}

func TestKeepAliveOff(t *testing.T) {
	server, _ := testutil.TCPPair(t)
	KeepAlive(server, time.Minute)
	if err := KeepAlive(server, 0); err != nil {
		t.Fatal(err)
	}
	raw, _ := server.(syscall.Conn).SyscallConn()
	var on, user int
	raw.Control(func(fd uintptr) {
		on, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		user, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	})
	if on != 0 || user != 0 {
		t.Errorf("SO_KEEPALIVE = %d, TCP_USER_TIMEOUT = %d after KeepAlive(0)", on, user)
	}
}
