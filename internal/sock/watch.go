package sock

import (
	"net"
	"sync"
	"syscall"
)

// WatchClose calls gone, once and on a goroutine of its own, when the
// client of c closes its end of the connection or the connection fails,
// until the returned stop is called. It serves a handler that is not
// reading the connection while the application waits on the client (an
// SSE stream, a long poll): fasthttp reads nothing then, and would not
// notice. A client that half-closes (shuts down its sending side) counts as
// gone, as under uvicorn. A c without a file descriptor is not watched.
//
// It costs two system calls (epoll_ctl on Linux, kevent on macOS), so a
// handler starts a watch only once the application waits.
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

// watcher is the process's poller (epoll, kqueue) for watched
// connections, and the goroutine that waits on it.
type watcher struct {
	ep   int
	mu   sync.Mutex
	next uint64
	subs map[uint64]func()
}

// theWatcher is the process's one watcher, started on first use.
var theWatcher = sync.OnceValues(func() (*watcher, error) {
	ep, err := newPoller()
	if err != nil {
		return nil, err
	}
	// Tokens begin at 4096: macOS keeps them in a pointer field, and the
	// runtime takes a smaller non-zero value there for a bad pointer when
	// it moves a stack.
	w := &watcher{ep: ep, next: 4095, subs: map[uint64]func(){}}
	go w.run()
	return w, nil
})

func (w *watcher) add(raw syscall.RawConn, gone func()) func() {
	w.mu.Lock()
	w.next++
	token := w.next
	w.subs[token] = gone
	w.mu.Unlock()
	fd := -1
	cerr := raw.Control(func(f uintptr) {
		if arm(w.ep, int(f), token) == nil {
			fd = int(f)
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
			raw.Control(func(f uintptr) { disarm(w.ep, int(f)) })
		})
	}
}

// run calls each watch's gone as the poller reports its connection's end.
func (w *watcher) run() {
	waitEnds(w.ep, func(token uint64) {
		w.mu.Lock()
		gone := w.subs[token]
		delete(w.subs, token)
		w.mu.Unlock()
		if gone != nil {
			go gone()
		}
	})
}
