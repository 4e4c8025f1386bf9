package sock

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// KeepAlive turns TCP keepalive on for c: after idle with nothing
// received, the kernel probes the peer every idle, and drops the
// connection at the third probe left unanswered. The kernel sends no probe
// while data it sent is unacknowledged (a heartbeat to a peer that
// vanished), so the same bound is also set as TCP_USER_TIMEOUT: data left
// unacknowledged for idle plus three probes' time drops the connection
// too. An idle of 0 turns both off (a listener may have turned keepalive
// on). A c without a socket (a pipe, a TLS connection) is left as it is.
func KeepAlive(c net.Conn, idle time.Duration) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	name, value := userTimeout(0) // the system's
	opts := []struct{ level, name, value int }{
		{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 0},
		{unix.IPPROTO_TCP, name, value},
	}
	if idle > 0 {
		secs := max(int(idle/time.Second), 1)
		name, value := userTimeout(4 * secs)
		opts = []struct{ level, name, value int }{
			{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
			{unix.IPPROTO_TCP, keepIdle, secs},
			{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, secs},
			{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 3},
			{unix.IPPROTO_TCP, name, value},
		}
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		for _, o := range opts {
			if serr = unix.SetsockoptInt(int(fd), o.level, o.name, o.value); serr != nil {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}
