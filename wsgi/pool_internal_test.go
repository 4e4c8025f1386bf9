package wsgi

import (
	"context"
	"testing"
	"time"
)

// TestPoolMaxWait: with every thread taken, a request waits at most the
// bound and is then refused as waitedOut; the counts say so. A free thread
// is taken at once, and a cutoff refuses as drained.
func TestPoolMaxWait(t *testing.T) {
	p := &Pool{slots: newPool(1)}
	p.SetMaxWait(100 * time.Millisecond)
	slot, why := p.slots.acquire(context.Background())
	if why != given {
		t.Fatalf("a free slot: %v", why)
	}
	began := time.Now()
	if _, why := p.slots.acquire(context.Background()); why != waitedOut {
		t.Fatalf("no slot free past the bound: %v, want waitedOut", why)
	}
	if took := time.Since(began); took < 100*time.Millisecond || took > time.Second {
		t.Errorf("waited %s for a bound of 100ms", took)
	}
	st := p.Stats()
	if st.Threads != 1 || st.Busy != 1 || st.Waiting != 0 || st.Waited != 1 || st.TimedOut != 1 || st.WaitTime < 100*time.Millisecond {
		t.Errorf("stats %+v", st)
	}
	got := make(chan refusal, 1)
	go func() {
		_, why := p.slots.acquire(context.Background())
		got <- why
	}()
	time.Sleep(20 * time.Millisecond)
	if st := p.Stats(); st.Waiting != 1 {
		t.Errorf("waiting %d, want 1", st.Waiting)
	}
	p.slots.release(slot)
	if why := <-got; why != given {
		t.Errorf("a slot freed within the bound: %v, want given", why)
	}
	p.Cutoff()
	p.SetMaxWait(0)
	if _, why := p.slots.acquire(context.Background()); why != drained {
		t.Errorf("after a cutoff: %v, want drained", why)
	}
	if st := p.Stats(); st.CutOff != 1 {
		t.Errorf("cut off %d, want 1", st.CutOff)
	}
}
