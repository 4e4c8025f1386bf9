package realtime

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestPublishRefuses(t *testing.T) {
	h := New(nil)
	for _, c := range []struct {
		channel string
		size    int
		ok      bool
	}{
		{"room", 10, true},
		{"room", MaxFrame, true},
		{"room", MaxFrame + 1, false},
		{"", 1, false},
		{"\x00internal", 1, false},
		{"\x1fx", 1, false},
		{"\x7fx", 1, false},
		{"caf\u00e9 \U0001f525", 1, true},
		{string(make([]byte, MaxChannel+1)), 1, false},
	} {
		_, ok := h.Publish(c.channel, make([]byte, c.size))
		if ok != c.ok {
			t.Errorf("Publish(%q, %d bytes) ok = %v, want %v", c.channel, c.size, ok, c.ok)
		}
	}
	if st := h.Stats(); st.Published != 3 || st.Refused != 6 || st.JournalDepth != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestPublishEvent: a frame's event type goes into its SSE event, and an
// event that would break the stream or forge the server's is refused.
func TestPublishEvent(t *testing.T) {
	h := New(nil)
	sub, err := h.Subscribe("room", false, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	id, ok := h.PublishEvent("room", "update", []byte("one\ntwo"))
	if !ok {
		t.Fatal("refused")
	}
	f := <-sub.C()
	if want := "id: " + id.String() + "\nevent: update\ndata: one\ndata: two\n\n"; string(f.SSE()) != want {
		t.Fatalf("SSE %q, want %q", f.SSE(), want)
	}
	for _, ev := range []string{GapEvent, PositionEvent, "m0-anything", "a\nb", "a\rb", "tab\there", "\x7f", strings.Repeat("e", MaxEvent+1)} {
		if _, ok := h.PublishEvent("room", ev, []byte("x")); ok || ValidEvent(ev) {
			t.Errorf("event %q taken", ev)
		}
	}
	for _, ev := range []string{"", "m0", "M0-not-ours", "caf\u00e9", string(bytes.Repeat([]byte("e"), MaxEvent))} {
		if !ValidEvent(ev) {
			t.Errorf("event %q refused", ev)
		}
	}
}

// TestPublishID: a frame numbered by NextID is published as that id, and
// an id the hub's counter cannot have handed out is refused.
func TestPublishID(t *testing.T) {
	h := New(nil)
	sub, err := h.Subscribe("room", false, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	id := h.NextID()
	if !h.PublishID("room", id, []byte("x")) {
		t.Fatal("an id from NextID was refused")
	}
	if f := <-sub.C(); f.ID != id || string(f.Data) != "x" {
		t.Fatalf("frame %v %q", f.ID, f.Data)
	}
	for name, bad := range map[string]ID{
		"zero":        {},
		"other epoch": {Epoch: id.Epoch + 1, Seq: id.Seq},
		"not yet":     {Epoch: id.Epoch, Seq: id.Seq + 1},
	} {
		if h.PublishID("room", bad, []byte("x")) {
			t.Errorf("%s id %v published", name, bad)
		}
	}
	if h.PublishID("\x00internal", h.NextID(), []byte("x")) {
		t.Error("a reserved channel took a frame")
	}
	if st := h.Stats(); st.Published != 1 || st.Refused != 4 {
		t.Errorf("stats %+v", st)
	}
}

func FuzzSubscribe(f *testing.F) {
	for _, s := range []string{"", "x-1", "1-1", "\x00", "room"} {
		f.Add("room", s)
	}
	f.Fuzz(func(t *testing.T, channel, lastID string) {
		h := New(&Options{ReplayFrames: 4})
		for range 6 {
			h.Publish("room", []byte("x"))
		}
		s, err := h.Subscribe(channel, true, lastID)
		if !ValidChannel(channel) {
			if err == nil {
				t.Fatalf("Subscribe(%q) took an invalid channel", channel)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// The journal holds frames 3..6 of the room: an id of this run from
		// 2 to 6 is replayed (what the room has after it), anything else
		// gets the gap.
		id, ok := ParseID(lastID)
		replay := ok && id.Epoch == h.Newest().Epoch && id.Seq >= 2 && id.Seq <= 6
		if !replay {
			if s.Gap == nil || s.Gap.LastEventID != lastID || len(s.Replay) != 0 {
				t.Fatalf("Subscribe(%q, %q): replay %d frames, gap %v; want the gap", channel, lastID, len(s.Replay), s.Gap)
			}
			return
		}
		want := 0
		if channel == "room" {
			want = int(6 - id.Seq)
		}
		if s.Gap != nil || len(s.Replay) != want {
			t.Fatalf("Subscribe(%q, %q): replay %d frames, gap %v; want %d frames", channel, lastID, len(s.Replay), s.Gap, want)
		}
	})
}

// TestSeam: subscribers that join while frames are being published, with
// the id of the last frame they saw, get every frame after it exactly
// once, in order, first from the journal and then live.
func TestSeam(t *testing.T) {
	h := New(&Options{ReplayFrames: 4096, Queue: 4096})
	const total = 3000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= total; i++ {
			h.Publish("c", []byte(strconv.Itoa(i)))
		}
	}()
	errs := make(chan string, 100)
	for k := 0; k < 50; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last ID
			for last.Seq == 0 { // the last id a client saw
				last = h.Newest()
			}
			s, err := h.Subscribe("c", true, last.String())
			if err != nil || s.Gap != nil {
				errs <- "gap or error: " + last.String()
				return
			}
			defer s.Close()
			next := last.Seq + 1
			check := func(f *Frame) bool {
				if f.ID.Seq != next || string(f.Data) != strconv.FormatUint(next, 10) {
					errs <- "after " + last.String() + ": got " + f.ID.String() + " want seq " + strconv.FormatUint(next, 10)
					return false
				}
				next++
				return true
			}
			for _, f := range s.Replay {
				if !check(f) {
					return
				}
			}
			for next <= total {
				select {
				case f := <-s.C():
					if !check(f) {
						return
					}
				case <-time.After(10 * time.Second):
					errs <- "stalled at " + strconv.FormatUint(next, 10)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestSlowSubscriber: a subscriber that stops reading is dropped when its
// queue overflows, and counted; the publisher never waits, and a subscriber
// that keeps up gets every frame.
func TestSlowSubscriber(t *testing.T) {
	h := New(&Options{Queue: 8})
	slow, _ := h.Subscribe("c", false, "")
	fast, _ := h.Subscribe("c", false, "")
	for i := 0; i < 100; i++ {
		h.Publish("c", []byte(strconv.Itoa(i)))
		select {
		case f := <-fast.C():
			if string(f.Data) != strconv.Itoa(i) {
				t.Fatalf("frame %d: %q", i, f.Data)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("frame %d did not come", i)
		}
	}
	select {
	case <-slow.Done():
	default:
		t.Fatal("the slow subscriber was not dropped")
	}
	if slow.Drained() {
		t.Error("dropped as drained, not as slow")
	}
	select {
	case <-fast.Done():
		t.Error("the subscriber that kept up was dropped")
	default:
	}
	if st := h.Stats(); st.Slow != 1 {
		t.Errorf("slow = %d", st.Slow)
	}
	slow.Close() // after the hub let go: harmless
	fast.Close()
}

func TestDrainEndsSubscriptions(t *testing.T) {
	h := New(nil)
	s, _ := h.Subscribe("c", false, "")
	h.Drain()
	h.Drain()
	select {
	case <-s.Done():
	default:
		t.Fatal("not ended by the drain")
	}
	if !s.Drained() {
		t.Error("not drained")
	}
	if _, err := h.Subscribe("c", false, ""); err != ErrDraining {
		t.Errorf("Subscribe while draining: %v", err)
	}
	if _, ok := h.Publish("c", []byte("x")); !ok {
		t.Error("publishing stops while draining")
	}
}

func TestGapNamesTheIDs(t *testing.T) {
	h := New(&Options{ReplayFrames: 2})
	for range 5 {
		h.Publish("c", []byte("x"))
	}
	s, _ := h.Subscribe("c", true, "stale")
	if s.Gap == nil || s.Replay != nil {
		t.Fatalf("gap %v replay %v", s.Gap, s.Replay)
	}
	ev := string(appendGap(nil, s.Gap))
	var data gapData
	const prefix = "event: m0-gap\ndata: "
	if len(ev) < len(prefix) || ev[:len(prefix)] != prefix || json.Unmarshal([]byte(ev[len(prefix):len(ev)-2]), &data) != nil {
		t.Fatalf("gap event %q", ev)
	}
	if data.LastEventID != "stale" || data.NewestID != h.Newest().String() {
		t.Errorf("gap data %+v, newest %s", data, h.Newest())
	}
	if st := h.Stats(); st.Gaps != 1 {
		t.Errorf("gaps = %d", st.Gaps)
	}
}

func TestAppendEvent(t *testing.T) {
	for _, c := range []struct {
		id, event, data, want string
	}{
		{"1-1", "", "hello", "id: 1-1\ndata: hello\n\n"},
		{"", "", "", "data: \n\n"},
		{"1-2", "", "a\nb", "id: 1-2\ndata: a\ndata: b\n\n"},
		{"1-3", "", "a\r\nb\rc\n", "id: 1-3\ndata: a\ndata: b\ndata: c\ndata: \n\n"},
		{"", "m0-gap", "{}", "event: m0-gap\ndata: {}\n\n"},
		{"1-4", "", "\xff\xfe", "id: 1-4\ndata: \xff\xfe\n\n"},
	} {
		if got := string(appendEvent(nil, c.id, c.event, []byte(c.data))); got != c.want {
			t.Errorf("appendEvent(%q, %q, %q) = %q, want %q", c.id, c.event, c.data, got, c.want)
		}
	}
}

func TestShutdownWaitsForHolds(t *testing.T) {
	h := New(nil)
	s, _ := h.Subscribe("c", false, "")
	go func() {
		<-s.Done() // as a held stream: it sees the drain, sends its end, closes
		time.Sleep(10 * time.Millisecond)
		s.Close()
	}()
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !s.closed.Load() {
		t.Fatal("Shutdown returned before the subscription closed")
	}
	s2 := New(nil)
	sub, _ := s2.Subscribe("c", false, "")
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s2.Shutdown(ctx); err == nil || !strings.Contains(err.Error(), "1 held connections") {
		t.Errorf("Shutdown with a subscription that never closes: %v", err)
	}
}

// nullBus takes frames and sends them nowhere: a hub with a bus orders
// what it delivers.
type nullBus struct{}

func (nullBus) Send(*Frame) error { return nil }

// TestReorder: with a bus, a frame that arrives ahead of a lower id waits
// for it and follows it; one whose lower id never comes is released after
// ReorderWait; a frame older than the next is delivered as it comes.
func TestReorder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ids := NewCounter()
		h := New(&Options{ReplayFrames: 16, IDs: ids, Bus: nullBus{}})
		sub, err := h.Subscribe("c", false, "")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		frame := func(seq uint64) *Frame {
			return &Frame{ID: ID{Epoch: ids.Newest().Epoch, Seq: seq}, Channel: "c", Data: []byte(strconv.FormatUint(seq, 10))}
		}
		got := func() []uint64 {
			synctest.Wait()
			var out []uint64
			for {
				select {
				case f := <-sub.C():
					out = append(out, f.ID.Seq)
				default:
					return out
				}
			}
		}
		for range 5 {
			ids.Next() // five ids taken, by other processes
		}
		h.Deliver(frame(2))
		h.Deliver(frame(3))
		if g := got(); len(g) != 0 {
			t.Fatalf("delivered %v ahead of 1", g)
		}
		h.Deliver(frame(1))
		if g := got(); !slices.Equal(g, []uint64{1, 2, 3}) {
			t.Fatalf("delivered %v, want 1 2 3", g)
		}
		// 4 never comes: 5 waits ReorderWait, then goes.
		h.Deliver(frame(5))
		time.Sleep(ReorderWait - time.Nanosecond)
		if g := got(); len(g) != 0 {
			t.Fatalf("delivered %v before the wait was over", g)
		}
		time.Sleep(time.Nanosecond)
		if g := got(); !slices.Equal(g, []uint64{5}) {
			t.Fatalf("delivered %v, want 5", g)
		}
		h.Deliver(frame(4)) // late: as it comes
		if id, _ := h.Publish("c", []byte("6")); id.Seq != 6 {
			t.Fatalf("published as %v", id)
		}
		if g := got(); !slices.Equal(g, []uint64{4, 6}) {
			t.Fatalf("delivered %v, want 4 6", g)
		}
		// Each held frame waits its own ReorderWait: 8 (7 missing) then,
		// half a wait later, 10 (9 missing); 8 goes first, 10 after.
		for range 4 {
			ids.Next()
		}
		h.Deliver(frame(8))
		time.Sleep(ReorderWait / 2)
		h.Deliver(frame(10))
		time.Sleep(ReorderWait / 2)
		if g := got(); !slices.Equal(g, []uint64{8}) {
			t.Fatalf("delivered %v, want 8 alone", g)
		}
		time.Sleep(ReorderWait / 2)
		if g := got(); !slices.Equal(g, []uint64{10}) {
			t.Fatalf("delivered %v, want 10", g)
		}
		h.Deliver(frame(8)) // twice: the journal has it, nothing is sent
		if g := got(); len(g) != 0 {
			t.Fatalf("delivered %v again", g)
		}
		// The journal replays in id order, whatever the arrival.
		s2, _ := h.Subscribe("c", true, ID{Epoch: ids.Newest().Epoch, Seq: 0}.String())
		if s2.Gap != nil {
			t.Fatal("a gap")
		}
		var seqs []uint64
		for _, f := range s2.Replay {
			seqs = append(seqs, f.ID.Seq)
		}
		if !slices.Equal(seqs, []uint64{1, 2, 3, 4, 5, 6, 8, 10}) {
			t.Fatalf("replayed %v", seqs)
		}
		s2.Close()
	})
}

// slowBus is a bus whose frames can arrive a second apart (Reorderer).
type slowBus struct{ nullBus }

func (slowBus) ReorderWait() time.Duration { return time.Second }

// TestReorderBusWait: a hub holds a frame ahead of a lower id as long as
// its bus says, not ReorderWait.
func TestReorderBusWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ids := NewCounter()
		h := New(&Options{ReplayFrames: 16, IDs: ids, Bus: slowBus{}})
		sub, err := h.Subscribe("c", false, "")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		ids.Next()
		ids.Next()
		h.Deliver(&Frame{ID: ID{Epoch: ids.Newest().Epoch, Seq: 2}, Channel: "c"})
		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		if len(sub.C()) != 0 {
			t.Fatal("2 delivered before the bus's wait for 1 was over")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if f := <-sub.C(); f.ID.Seq != 2 {
			t.Fatalf("delivered %v, want 2", f.ID)
		}
	})
}
