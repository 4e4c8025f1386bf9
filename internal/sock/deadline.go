package sock

import (
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
	at     atomic.Int64 // the deadline set, Unix nanoseconds; 0 is none known
}

// Renew sets c's write deadline when it is due, and reports any error
// setting it.
func (w *SendWindow) Renew(c interface{ SetWriteDeadline(time.Time) error }) error {
	if w.Window <= 0 {
		return nil
	}
	now := time.Now()
	if at := w.at.Load(); at != 0 && time.Duration(at-now.UnixNano()) >= w.Window {
		return nil
	}
	dl := now.Add(w.Window + w.Window/16)
	if err := c.SetWriteDeadline(dl); err != nil {
		return err
	}
	w.at.Store(dl.UnixNano())
	return nil
}

// Forget says the deadline was set elsewhere: the next Renew sets it.
func (w *SendWindow) Forget() { w.at.Store(0) }
