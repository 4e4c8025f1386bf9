package sock

import (
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// WatchClose calls gone, once and on a goroutine of its own, when the
// client of c closes its end of the connection or the connection fails,
// until the returned stop is called. It serves a handler that is not
// reading the connection while the application waits on the client (an
// SSE stream, a long poll): fasthttp reads nothing then, and would not
// notice. A client that half-closes (shuts down its sending side) counts as
// gone, as under uvicorn. A c without a file descriptor is not watched.
//
// It costs two system calls (epoll_ctl), so a handler starts a watch only
// once the application waits.
func WatchClose(c net.Conn, gone func()) (stop func()) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	w, err := theWatcher()
	if err != nil {
		return func() {}
	}
	return w.add(raw, gone)
}

// watcher is the process's epoll instance for watched connections, and the
// goroutine that waits on it.
type watcher struct {
	ep   int
	mu   sync.Mutex
	next uint64
	subs map[uint64]func()
}

// theWatcher is the process's one watcher, started on first use.
var theWatcher = sync.OnceValues(func() (*watcher, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &watcher{ep: ep, subs: map[uint64]func(){}}
	go w.run()
	return w, nil
})

func (w *watcher) add(raw syscall.RawConn, gone func()) func() {
	w.mu.Lock()
	w.next++
	token := w.next
	w.subs[token] = gone
	w.mu.Unlock()
	// Only the peer's close and errors: not readability, so a pipelined
	// request waiting in the socket does not count. One shot: the event
	// fires once and the registration stays disarmed.
	// The event's 64 bits of user data are its Fd and Pad fields on every
	// architecture: they carry the token.
	ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(token), Pad: int32(token >> 32)}
	var fd int
	cerr := raw.Control(func(f uintptr) {
		fd = int(f)
		if err := unix.EpollCtl(w.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			fd = -1
		}
	})
	if cerr != nil || fd < 0 {
		w.mu.Lock()
		delete(w.subs, token)
		w.mu.Unlock()
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			delete(w.subs, token)
			w.mu.Unlock()
			// Control fails once the connection is closed: the kernel has
			// dropped the registration with the descriptor then, and the
			// number may belong to another connection by now.
			raw.Control(func(f uintptr) { unix.EpollCtl(w.ep, unix.EPOLL_CTL_DEL, int(f), nil) })
		})
	}
}

func (w *watcher) run() {
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.ep, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for i := range events[:n] {
			token := uint64(uint32(events[i].Fd)) | uint64(uint32(events[i].Pad))<<32
			w.mu.Lock()
			gone := w.subs[token]
			delete(w.subs, token)
			w.mu.Unlock()
			if gone != nil {
				go gone()
			}
		}
	}
}
