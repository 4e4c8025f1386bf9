package sock

import (
	"io"
	"math"
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
// sets that one and is retried, one at or after it is not. (Real time:
// the deadlines are kept on the monotonic clock, which synctest's bubble
// does not give.)
func TestReadDeadline(t *testing.T) {
	var set readDeadlines
	var d ReadDeadline
	now := time.Now()
	d.Set(&set, now.Add(time.Hour))
	d.Set(&set, now.Add(2*time.Hour)) // later: left to a retry
	d.Set(&set, time.Time{})          // none: likewise
	if len(set) != 1 || !set[0].Equal(now.Add(time.Hour)) {
		t.Fatalf("set %v, want the first deadline alone", set)
	}
	if d.Retry(&set, io.EOF) {
		t.Fatal("retried an end of file")
	}
	if !d.Retry(&set, os.ErrDeadlineExceeded) || len(set) != 2 || !set[1].IsZero() {
		t.Fatalf("a timeout with no deadline asked for: set %v", set)
	}
	d.Set(&set, now.Add(3*time.Hour)) // none on the socket: set
	d.Set(&set, now.Add(time.Hour))   // earlier: set
	if len(set) != 4 || !set[3].Equal(now.Add(time.Hour)) {
		t.Fatalf("set %v", set)
	}
	d.Set(&set, now.Add(-time.Millisecond)) // passed already
	if len(set) != 5 || d.Retry(&set, os.ErrDeadlineExceeded) {
		t.Fatalf("retried past the deadline asked for: set %v", set)
	}
}

// TestMonoOf: the zero time is none, a time before the process's clock
// and one without a monotonic reading in the past are past, and one past
// what a Duration holds is the latest.
func TestMonoOf(t *testing.T) {
	if MonoOf(time.Time{}) != 0 {
		t.Error("the zero time is not none")
	}
	if w := MonoOf(time.Unix(1, 0)); w != 1 || w > Mono() {
		t.Errorf("1970: %d", w)
	}
	if w := MonoOf(time.Now().Add(math.MaxInt64)); w != math.MaxInt64 {
		t.Errorf("the far future: %d", w)
	}
	soon := time.Now().Add(time.Second)
	if w := MonoOf(soon); !MonoTime(w).Equal(soon) || w <= Mono() {
		t.Errorf("a second ahead: %d, %v", w, MonoTime(w))
	}
}
