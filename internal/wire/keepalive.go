package wire

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// KeepAlive turns TCP keepalive on for c: after idle with nothing
// received, the kernel probes the peer every idle, and drops the
// connection at the third probe left unanswered. A c without a socket
// (a pipe, a TLS connection) is left as it is; so is any c when idle is 0.
func KeepAlive(c net.Conn, idle time.Duration) error {
	if idle <= 0 {
		return nil
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	secs := max(int(idle/time.Second), 1)
	var serr error
	err = raw.Control(func(fd uintptr) {
		for _, o := range [...]struct{ level, name, value int }{
			{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
			{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, secs},
			{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, secs},
			{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 3},
		} {
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
