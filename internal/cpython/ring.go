package cpython

/*
#include "m0py.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// The rings between Go and an executor's loop (m0py.h, "The rings"): Go
// writes the inbound one and reads the outbound one, with atomic loads and
// stores of their counts and no call into C.

const ringHdr = C.M0_R_HDR

// recSize is the bytes a record of n bytes of data takes in a ring.
func recSize(n int) uint64 { return (ringHdr + uint64(n) + 7) &^ 7 }

// u32 and u64 are a ring's counts and flags as sync/atomic takes them.
func u32(p *C.uint32_t) *uint32 { return (*uint32)(unsafe.Pointer(p)) }
func u64(p *C.uint64_t) *uint64 { return (*uint64)(unsafe.Pointer(p)) }

// ringBytes is r's buffer.
func ringBytes(r *C.m0_ring) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(r.buf)), int(r.cap))
}

// ringPut appends a message to r, copying data; false when r has not the
// room (or data is over a quarter of it). The ring's one writer:
// callers hold the executor's inMu.
func ringPut(r *C.m0_ring, kind int, slot, gen uint32, flags int, data []byte) bool {
	size := uint64(r.cap)
	if uint64(len(data)) > size/4 {
		return false
	}
	need := recSize(len(data))
	h := atomic.LoadUint64(u64(&r.head))
	t := atomic.LoadUint64(u64(&r.tail))
	pos := h & (size - 1)
	end := size - pos
	var skip uint64
	if end < need {
		skip = end
	}
	if h+skip+need-t > size {
		return false
	}
	buf := ringBytes(r)
	if skip > 0 {
		if end >= ringHdr {
			(*C.m0_rhdr)(unsafe.Pointer(&buf[pos])).kind = C.M0_R_SKIP
		}
		h += skip
		pos = 0
	}
	*(*C.m0_rhdr)(unsafe.Pointer(&buf[pos])) = C.m0_rhdr{
		len:   C.uint32_t(len(data)),
		kind:  C.int32_t(kind),
		slot:  C.uint32_t(slot),
		gen:   C.uint32_t(gen),
		flags: C.int32_t(flags),
	}
	copy(buf[pos+ringHdr:], data)
	atomic.StoreUint64(u64(&r.head), h+need)
	return true
}

// ringTake hands each message r holds to f, its data copied to Go memory,
// and frees the ring's room once all are handed. The ring's one reader.
func ringTake(r *C.m0_ring, f func(kind int, slot, gen uint32, flags int, data []byte)) {
	size := uint64(r.cap)
	t := atomic.LoadUint64(u64(&r.tail))
	h := atomic.LoadUint64(u64(&r.head))
	if t == h {
		return
	}
	buf := ringBytes(r)
	for t < h {
		pos := t & (size - 1)
		end := size - pos
		if end < ringHdr {
			t += end
			continue
		}
		hd := (*C.m0_rhdr)(unsafe.Pointer(&buf[pos]))
		if hd.kind == C.M0_R_SKIP {
			t += end
			continue
		}
		n := int(hd.len)
		var data []byte
		if n > 0 {
			data = make([]byte, n)
			copy(data, buf[pos+ringHdr:])
		}
		kind, slot, gen, flags := int(hd.kind), uint32(hd.slot), uint32(hd.gen), int(hd.flags)
		t += recSize(n)
		f(kind, slot, gen, flags, data)
	}
	atomic.StoreUint64(u64(&r.tail), t)
}

// eachMsg hands each of the n messages at v (a queue's, taken from C) to
// f, its data a view of C memory valid only during the call, then frees
// them.
func eachMsg(v *C.m0_amsg, n int, f func(kind int, slot, gen uint32, flags int, data []byte)) {
	if n == 0 {
		return
	}
	defer C.m0_asgi_free(v, C.size_t(n))
	for _, m := range unsafe.Slice(v, n) {
		var data []byte
		if m.len > 0 {
			data = unsafe.Slice((*byte)(unsafe.Pointer(m.data)), int(m.len))
		}
		f(int(m.kind), uint32(m.slot), uint32(m.gen), int(m.flags), data)
	}
}

// testRing is a ring of its own with the loop's writer and reader, for the
// rings' tests (ring_test.go; a test file cannot call C).
type testRing struct{ r *C.m0_ring }

func newTestRing(size int) testRing { return testRing{C.m0_ring_new(C.size_t(size))} }

func (t testRing) free() { C.m0_ring_free(t.r) }

// cPut is the loop's writer.
func (t testRing) cPut(kind int, slot, gen uint32, flags int, data []byte) bool {
	var p *C.char
	if len(data) > 0 {
		p = (*C.char)(unsafe.Pointer(&data[0]))
	}
	return C.m0_ring_put(t.r, C.int(kind), C.uint32_t(slot), C.uint32_t(gen), C.int(flags), p, C.size_t(len(data))) == 1
}

// cTake is the loop's reader.
func (t testRing) cTake(f func(kind int, slot, gen uint32, flags int, data []byte)) {
	var v *C.m0_amsg
	n := int(C.m0_ring_take(t.r, &v))
	eachMsg(v, n, f)
}

func (t testRing) goPut(kind int, slot, gen uint32, flags int, data []byte) bool {
	return ringPut(t.r, kind, slot, gen, flags, data)
}

func (t testRing) goTake(f func(kind int, slot, gen uint32, flags int, data []byte)) {
	ringTake(t.r, f)
}
