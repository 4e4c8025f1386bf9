package sock

import (
	"io"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

type deadlines []time.Time

func (d *deadlines) SetWriteDeadline(t time.Time) error { *d = append(*d, t); return nil }

// TestSendWindow: the deadline is set when less than a window is left, a
// window and a sixteenth ahead; Forget makes the next Renew set it.
func TestSendWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var set deadlines
		w := SendWindow{Window: 16 * time.Second}
		start := time.Now()
		w.Renew(&set)
		if len(set) != 1 || !set[0].Equal(start.Add(17*time.Second)) {
			t.Fatalf("first renew set %v", set)
		}
		time.Sleep(999 * time.Millisecond)
		w.Renew(&set) // 16.001 s left: nothing to do
		if len(set) != 1 {
			t.Fatalf("renewed with a window left: %v", set)
		}
		time.Sleep(2 * time.Millisecond)
		w.Renew(&set) // 15.999 s left: renewed
		if len(set) != 2 || !set[1].Equal(time.Now().Add(17*time.Second)) {
			t.Fatalf("second renew set %v", set)
		}
		w.Forget()
		w.Renew(&set)
		if len(set) != 3 {
			t.Fatalf("after Forget: %v", set)
		}
		var none deadlines
		(&SendWindow{}).Renew(&none)
		if len(none) != 0 {
			t.Fatalf("a zero window set %v", none)
		}
	})
}

type readDeadlines []time.Time

func (d *readDeadlines) SetReadDeadline(t time.Time) error { *d = append(*d, t); return nil }

// TestReadDeadline: the socket's deadline is set when there is none or it
// would pass after the one asked for; a timeout before the one asked for
// sets that one and is retried, one at or after it is not.
func TestReadDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var set readDeadlines
		var d ReadDeadline
		now := time.Now()
		d.Set(&set, now.Add(time.Second))
		d.Set(&set, now.Add(2*time.Second)) // later: left to a retry
		d.Set(&set, time.Time{})            // none: likewise
		if len(set) != 1 || !set[0].Equal(now.Add(time.Second)) {
			t.Fatalf("set %v, want the first deadline alone", set)
		}
		if d.Retry(&set, io.EOF) {
			t.Fatal("retried an end of file")
		}
		if !d.Retry(&set, os.ErrDeadlineExceeded) || len(set) != 2 || !set[1].IsZero() {
			t.Fatalf("a timeout with no deadline asked for: set %v", set)
		}
		d.Set(&set, now.Add(3*time.Second)) // none on the socket: set
		d.Set(&set, now.Add(time.Second))   // earlier: set
		if len(set) != 4 || !set[3].Equal(now.Add(time.Second)) {
			t.Fatalf("set %v", set)
		}
		time.Sleep(time.Second)
		if d.Retry(&set, os.ErrDeadlineExceeded) {
			t.Fatal("retried past the deadline asked for")
		}
	})
}
