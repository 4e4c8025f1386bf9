package sock

import (
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
