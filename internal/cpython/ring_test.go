package cpython

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

type ringMsg struct {
	kind, flags int
	slot, gen   uint32
	data        []byte
}

// TestRings: what one side of a ring writes, the other reads whole and in
// order (Go's writer and C's reader, C's writer and Go's reader), over
// thousands of wraps of a small ring: data from none to a quarter of the
// ring, ends of the ring too short for a header, records that fill it to
// its end exactly, and a full ring, which refuses a message until the
// reader has taken.
func TestRings(t *testing.T) {
	const size = 4096
	for _, dir := range []string{"go-to-c", "c-to-go"} {
		t.Run(dir, func(t *testing.T) {
			r := newTestRing(size)
			defer r.free()
			put, take := r.goPut, r.cTake
			if dir == "c-to-go" {
				put, take = r.cPut, r.goTake
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(dir))))
			var want []ringMsg
			got := 0
			check := func() {
				take(func(kind int, slot, gen uint32, flags int, data []byte) {
					if got >= len(want) {
						t.Fatalf("message %d taken, only %d put", got, len(want))
					}
					w := want[got]
					if kind != w.kind || slot != w.slot || gen != w.gen || flags != w.flags || !bytes.Equal(data, w.data) {
						t.Fatalf("message %d: kind %d slot %d gen %d flags %d, %d bytes; put kind %d slot %d gen %d flags %d, %d bytes",
							got, kind, slot, gen, flags, len(data), w.kind, w.slot, w.gen, w.flags, len(w.data))
					}
					got++
				})
				if got != len(want) {
					t.Fatalf("%d messages taken of %d put", got, len(want))
				}
			}
			// Over a quarter of the ring is refused even when it is empty;
			// a quarter is taken.
			if put(1, 0, 0, 0, make([]byte, size/4+1)) {
				t.Fatal("a message over a quarter of the ring was put")
			}
			refused, tails, exact := 0, 0, 0
			var written uint64
			for i := 0; i < 40000; i++ {
				n := rng.IntN(size/4 + 1)
				switch i % 97 {
				case 0:
					n = size / 4
				case 1:
					n = 0
				}
				// Sizes that leave 8 or 16 bytes (no room for a header)
				// before the end, or none.
				end := size - int(written%size)
				switch {
				case i%13 == 0 && end-8 >= ringHdr && end-8-ringHdr <= size/4:
					n = end - 8 - ringHdr
					tails++
				case i%17 == 0 && end >= ringHdr && end-ringHdr <= size/4:
					n = end - ringHdr
					exact++
				}
				data := make([]byte, n)
				for j := range data {
					data[j] = byte(i + j*7)
				}
				m := ringMsg{kind: i % 9, slot: uint32(i), gen: uint32(i * 3), flags: i % 5, data: data}
				if !put(m.kind, m.slot, m.gen, m.flags, m.data) {
					refused++
					check() // the reader takes, and the message goes in then
					if !put(m.kind, m.slot, m.gen, m.flags, m.data) {
						t.Fatalf("message %d (%d bytes) refused by an empty ring", i, n)
					}
				}
				written = uint64(r.r.head) // the next record's place: head, skips included
				want = append(want, m)
				if rng.IntN(50) == 0 {
					check()
				}
			}
			check()
			if refused < 100 || tails < 100 || exact < 100 {
				t.Fatalf("the ring was full %d times, left a tail too short for a header %d times, was filled to its end %d times: too few to test", refused, tails, exact)
			}
			t.Logf("%d messages, full %d times, short tails %d, exact ends %d", len(want), refused, tails, exact)
		})
	}
}
