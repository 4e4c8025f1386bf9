package sock

import "golang.org/x/sys/unix"

// What differs between Linux and macOS in this package: the poller of
// WatchClose, the keepalive's options, corking, and the count of bytes
// waiting to be read.

func newPoller() (int, error) { return unix.EpollCreate1(unix.EPOLL_CLOEXEC) }

// arm watches fd for its peer's close and its errors only: not
// readability, so a pipelined request waiting in the socket does not
// count. One shot: the event fires once and the registration stays
// disarmed. The event's 64 bits of user data are its Fd and Pad fields on
// every architecture: they carry the token.
func arm(ep, fd int, token uint64) error {
	ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(token), Pad: int32(token >> 32)}
	return unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev)
}

func disarm(ep, fd int) { unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, fd, nil) }

// waitEnds calls ended with the token of each connection that ended, until
// the poller fails.
func waitEnds(ep int, ended func(token uint64)) {
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for i := range events[:n] {
			ended(uint64(uint32(events[i].Fd)) | uint64(uint32(events[i].Pad))<<32)
		}
	}
}

// keepIdle is the option that sets how long a connection is idle before
// the first keepalive probe, in seconds.
const keepIdle = unix.TCP_KEEPIDLE

// userTimeout is the option and value that drop a connection whose sent
// data stays unacknowledged for secs seconds (0: the system's bound).
func userTimeout(secs int) (name, value int) { return unix.TCP_USER_TIMEOUT, secs * 1000 }

// corkOption holds back partial segments while set.
const corkOption = unix.TCP_CORK

// readable is how many bytes wait to be read on the socket fd.
func readable(fd int) int {
	n, _ := unix.IoctlGetInt(fd, unix.SIOCINQ)
	return n
}
