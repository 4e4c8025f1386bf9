package sock

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The macOS side of sys_linux.go.

func newPoller() (int, error) {
	kq, err := unix.Kqueue()
	if err == nil {
		unix.CloseOnExec(kq)
	}
	return kq, err
}

// arm watches fd for readability, edge-triggered (EV_CLEAR), with the
// token as user data: kqueue has no event for the peer's close alone, so
// waitEnds passes on only the events that carry EV_EOF or EV_ERROR, and a
// pipelined request's bytes fire once and are ignored.
func arm(kq, fd int, token uint64) error {
	ev := unix.Kevent_t{Ident: uint64(fd), Filter: unix.EVFILT_READ, Flags: unix.EV_ADD | unix.EV_CLEAR}
	setToken(&ev, token)
	_, err := unix.Kevent(kq, []unix.Kevent_t{ev}, nil, nil)
	return err
}

func disarm(kq, fd int) {
	ev := unix.Kevent_t{Ident: uint64(fd), Filter: unix.EVFILT_READ, Flags: unix.EV_DELETE}
	unix.Kevent(kq, []unix.Kevent_t{ev}, nil, nil)
}

func waitEnds(kq int, ended func(token uint64)) {
	events := make([]unix.Kevent_t, 64)
	for {
		n, err := unix.Kevent(kq, nil, events, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for i := range events[:n] {
			ev := &events[i]
			if ev.Flags&(unix.EV_EOF|unix.EV_ERROR) == 0 {
				continue // bytes to read, not an end
			}
			// The watch's token is taken at its first end, so a later event
			// does nothing; the registration goes with the descriptor or
			// with stop. (Deleting it here, by its number, could delete a
			// new connection's that reused the number meanwhile.)
			ended(token(ev))
		}
	}
}

const keepIdle = unix.TCP_KEEPALIVE

// userTimeout: TCP_RXT_CONNDROPTIME bounds, in seconds, how long sent data
// may go unacknowledged.
func userTimeout(secs int) (name, value int) { return unix.TCP_RXT_CONNDROPTIME, secs }

// corkOption is none on macOS: TCP_NOPUSH holds back partial segments,
// but clearing it does not send what it held (XNU, unlike FreeBSD), so
// the end of a file could wait for the persist timer.
const corkOption = 0

// fionread is <sys/filio.h>'s FIONREAD, _IOR('f', 127, int).
const fionread = 0x4004667f

func readable(fd int) int {
	n, _ := unix.IoctlGetInt(fd, fionread)
	return n
}

// setToken and token keep the token in the event's user data, a pointer
// field the kernel hands back as it was given: as an integer, counted
// from 4096 (the least the runtime takes for a pointer when it moves a
// stack), which never reaches the Go heap's addresses, so the collector
// takes it for no pointer.
func setToken(ev *unix.Kevent_t, token uint64) { *(*uint64)(unsafe.Pointer(&ev.Udata)) = token }

func token(ev *unix.Kevent_t) uint64 { return *(*uint64)(unsafe.Pointer(&ev.Udata)) }
