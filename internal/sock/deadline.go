package sock

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// SendWindow bounds a send that makes no progress without setting a
// deadline on every write (each costs a lock and a timer in the runtime):
// Renew moves the write deadline only when less than Window is left, and
// then Window plus a sixteenth ahead, so a write fails once at least a
// whole Window passes with nothing taken, and most writes set nothing.
// Its zero Window is no bound. It is safe for concurrent use.
type SendWindow struct {
	Window time.Duration
	at     atomic.Int64 // the deadline set, a Mono reading; 0 is none known
}

// Renew sets c's write deadline when it is due, and reports any error
// setting it.
func (w *SendWindow) Renew(c interface{ SetWriteDeadline(time.Time) error }) error {
	if w.Window <= 0 {
		return nil
	}
	now := Mono()
	if at := w.at.Load(); at != 0 && time.Duration(at-now) >= w.Window {
		return nil
	}
	at := now + int64(w.Window+w.Window/16)
	if err := c.SetWriteDeadline(MonoTime(at)); err != nil {
		return err
	}
	w.at.Store(at)
	return nil
}

// Forget says the deadline was set elsewhere: the next Renew sets it.
func (w *SendWindow) Forget() { w.at.Store(0) }

// ReadDeadline keeps a connection's read deadline without setting it on
// every call. A server sets one or two on every request (the idle wait,
// then the request's own or none), and each costs a lock and a change to
// the runtime's timers, which at a thousand connections are cold memory.
// Set records the deadline asked for and touches the socket only when the
// one it holds would pass later than that, or it holds none; one that
// passes earlier fails a read, and Retry then sets the one asked for and
// has the read tried again. A read so fails at most once for each deadline
// passed on the socket, and only a deadline asked for ends a read. All
// that sets the read deadline of the connection must do so through it.
// It is safe for concurrent use.
type ReadDeadline struct {
	want atomic.Int64 // the deadline asked for, a MonoOf reading; 0 is none
	set  atomic.Int64 // the deadline on the socket, likewise
	mu   sync.Mutex   // serializes setting the socket's
}

type readDeadliner interface{ SetReadDeadline(time.Time) error }

// Set asks for t as c's read deadline (the zero time: none).
func (d *ReadDeadline) Set(c readDeadliner, t time.Time) error {
	w := MonoOf(t)
	d.want.Store(w)
	if s := d.set.Load(); s != 0 && (w == 0 || s <= w) {
		return nil // it passes first: a read then sets w (Retry)
	}
	return d.sync(c)
}

// Want returns the deadline asked for last (a Mono reading; 0 is none).
func (d *ReadDeadline) Want() int64 { return d.want.Load() }

// Reset sets t on c at once, as SetDeadline does.
func (d *ReadDeadline) Reset(c interface {
	readDeadliner
	SetDeadline(time.Time) error
}, t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := MonoOf(t)
	d.want.Store(w)
	if err := c.SetDeadline(t); err != nil {
		d.set.Store(0)
		return err
	}
	d.set.Store(w)
	if d.want.Load() != w { // a Set meanwhile left its deadline to this
		return d.syncLocked(c)
	}
	return nil
}

// Retry reports whether a read that failed with err should be tried
// again: err is a timeout, and the deadline that passed is not the one
// asked for, which is now set.
func (d *ReadDeadline) Retry(c readDeadliner, err error) bool {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	if w := d.want.Load(); w != 0 && w <= Mono() {
		return false
	}
	return d.sync(c) == nil
}

// sync sets the deadline asked for on the socket, until what it set is
// still what is asked for (a Set meanwhile may have found the socket's
// deadline early enough, and left it to this).
func (d *ReadDeadline) sync(c readDeadliner) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.syncLocked(c)
}

func (d *ReadDeadline) syncLocked(c readDeadliner) error {
	for {
		w := d.want.Load()
		var t time.Time
		if w != 0 {
			t = MonoTime(w)
		}
		if err := c.SetReadDeadline(t); err != nil {
			d.set.Store(0)
			return err
		}
		d.set.Store(w)
		if d.want.Load() == w {
			return nil
		}
	}
}
