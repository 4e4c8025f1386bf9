package realtime

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestIDRoundTrip(t *testing.T) {
	for _, id := range []ID{{1, 1}, {1764547200123, 42}, {^uint64(0), ^uint64(0)}, {35, 0}} {
		got, ok := ParseID(id.String())
		if !ok || got != id {
			t.Errorf("ParseID(%q) = %v, %v; want %v", id.String(), got, ok, id)
		}
	}
	for _, s := range []string{"", "-", "1-", "-1", "a-b", "1-1-1", "01-1", "1-01", "A-1", "+1-1", "1-+1", "1 -1",
		"zzzzzzzzzzzzzz-1", "1-99999999999999999999", "17", "garbage", "1_0-1"} {
		if id, ok := ParseID(s); ok {
			t.Errorf("ParseID(%q) = %v, want no id", s, id)
		}
	}
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"mfz3k2a0-42", "1-1", "", "0-0", "z-9", "a-", "-5", "Z-1", "00-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := ParseID(s)
		if !ok {
			return
		}
		// One id, one spelling: what parses is what String writes.
		if id.String() != s {
			t.Fatalf("ParseID(%q) = %v, which is written %q", s, id, id.String())
		}
	})
}

// FuzzIDString: every id String writes is one ParseID reads back, as the
// Last-Event-ID a browser returns.
func FuzzIDString(f *testing.F) {
	f.Add(uint64(1764547200123), uint64(42))
	f.Add(uint64(0), uint64(0))
	f.Add(^uint64(0), ^uint64(0))
	f.Add(uint64(35), uint64(10))
	f.Fuzz(func(t *testing.T, epoch, seq uint64) {
		id := ID{Epoch: epoch, Seq: seq}
		s := id.String()
		got, ok := ParseID(s)
		if !ok || got != id {
			t.Fatalf("ParseID(%q) = %v, %v; want %v", s, got, ok, id)
		}
	})
}

// TestJournal: a presented id, the journal's window and a restart decide
// between the frames missed and a gap.
func TestJournal(t *testing.T) {
	const epoch, restarted = 7, 8
	// A journal of 4 frames that began when 2 frames had gone out; frames
	// 3..10 published since, alternating channels a and b, so 7..10 remain.
	build := func(size int) *Journal {
		j := NewJournal(size, ID{epoch, 2})
		for seq := uint64(3); seq <= 10; seq++ {
			ch := "a"
			if seq%2 == 0 {
				ch = "b"
			}
			j.Add(&Frame{ID: ID{epoch, seq}, Channel: ch})
		}
		return j
	}
	newest := ID{epoch, 10}
	for _, c := range []struct {
		name    string
		size    int
		after   ID
		channel string
		want    string // the sequence numbers replayed, or "gap"
	}{
		{"up to date", 4, ID{epoch, 10}, "a", ""},
		{"missed one", 4, ID{epoch, 8}, "a", "9"},
		{"missed both of a channel", 4, ID{epoch, 6}, "a", "7,9"},
		{"the other channel", 4, ID{epoch, 6}, "b", "8,10"},
		{"beyond the window", 4, ID{epoch, 5}, "a", "gap"},
		{"before the journal began", 16, ID{epoch, 1}, "a", "gap"},
		{"when the journal began", 16, ID{epoch, 2}, "a", "3,5,7,9"},
		{"from the future", 4, ID{epoch, 11}, "a", "gap"},
		{"from an earlier run", 4, ID{epoch - 1, 9}, "a", "gap"},
		{"the same number after a restart", 4, ID{restarted, 9}, "a", "gap"},
		{"no journal, up to date", 0, ID{epoch, 10}, "a", ""},
		{"no journal, one behind", 0, ID{epoch, 9}, "a", "gap"},
	} {
		t.Run(c.name, func(t *testing.T) {
			frames, ok := build(c.size).Since(c.channel, c.after, newest)
			got := "gap"
			if ok {
				var seqs []string
				for _, f := range frames {
					seqs = append(seqs, strconv.FormatUint(f.ID.Seq, 10))
				}
				got = strings.Join(seqs, ",")
			}
			if got != c.want {
				t.Errorf("Since(%s, %v) = %q, want %q", c.channel, c.after, got, c.want)
			}
		})
	}
}

// TestJournalOutOfOrder: frames another process numbered may arrive after
// later ones; a replay is still in order.
func TestJournalOutOfOrder(t *testing.T) {
	j := NewJournal(8, ID{1, 0})
	for _, seq := range []uint64{1, 3, 2, 5, 4} {
		j.Add(&Frame{ID: ID{1, seq}, Channel: "c"})
	}
	frames, ok := j.Since("c", ID{1, 1}, ID{1, 5})
	if !ok || fmt.Sprint(seqs(frames)) != "[2 3 4 5]" {
		t.Errorf("Since = %v, %v", seqs(frames), ok)
	}
}

func seqs(frames []*Frame) []uint64 {
	var s []uint64
	for _, f := range frames {
		s = append(s, f.ID.Seq)
	}
	return s
}

// TestJournalMerge: a journal merged with an older one of the same epoch
// reaches back as far as the older did, keeps its newest frames when they
// do not all fit, and ignores another epoch's.
func TestJournalMerge(t *testing.T) {
	frame := func(seq uint64) *Frame { return &Frame{ID: ID{Epoch: 7, Seq: seq}, Channel: "c"} }
	newest := ID{Epoch: 7, Seq: 12}
	// A replacement's journal begins at 10; its sibling's holds 4 to 12.
	j := NewJournal(8, ID{Epoch: 7, Seq: 10})
	j.Add(frame(11))
	j.Add(frame(12))
	if _, ok := j.Since("c", ID{Epoch: 7, Seq: 5}, newest); ok {
		t.Fatal("replayed from before the journal began")
	}
	var theirs []*Frame
	for s := uint64(4); s <= 12; s++ {
		theirs = append(theirs, frame(s))
	}
	j.Merge(9, 3, theirs) // another epoch: nothing
	if _, ok := j.Since("c", ID{Epoch: 7, Seq: 5}, newest); ok {
		t.Fatal("a journal of another epoch was merged")
	}
	j.Merge(7, 3, theirs)
	// Nine frames above 3 do not fit in 8: the oldest goes, the floor is 4.
	if _, ok := j.Since("c", ID{Epoch: 7, Seq: 3}, newest); ok {
		t.Fatal("replayed past the frame that did not fit")
	}
	got, ok := j.Since("c", ID{Epoch: 7, Seq: 4}, newest)
	if !ok || len(got) != 8 || got[0].ID.Seq != 5 || got[7].ID.Seq != 12 {
		t.Fatalf("since 4: ok %v, %d frames", ok, len(got))
	}
}

// TestJournalLose: after Lose, a resume from before the lost id cannot be
// replayed; one from after it can.
func TestJournalLose(t *testing.T) {
	j := NewJournal(8, ID{Epoch: 3})
	for s := uint64(1); s <= 5; s++ {
		j.Add(&Frame{ID: ID{Epoch: 3, Seq: s}, Channel: "c"})
	}
	newest := ID{Epoch: 3, Seq: 5}
	j.Lose(ID{Epoch: 4, Seq: 9}) // another epoch: nothing
	if _, ok := j.Since("c", ID{Epoch: 3, Seq: 1}, newest); !ok {
		t.Fatal("another epoch's loss was taken")
	}
	j.Lose(ID{Epoch: 3, Seq: 3})
	if _, ok := j.Since("c", ID{Epoch: 3, Seq: 2}, newest); ok {
		t.Fatal("replayed across a loss")
	}
	if got, ok := j.Since("c", ID{Epoch: 3, Seq: 3}, newest); !ok || len(got) != 2 {
		t.Fatalf("after the loss: %v %d", ok, len(got))
	}
}
