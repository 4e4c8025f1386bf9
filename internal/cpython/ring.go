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

// ringBytes is r's buffer.
func ringBytes(r *C.m0_ring) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(r.buf)), int(r.cap))
}

// ringPut appends a message to r, copying data; false when r has not the
// room (or the message is over a quarter of it). The ring's one writer:
// callers hold the executor's inMu.
func ringPut(r *C.m0_ring, kind int, slot, gen uint32, flags int, data []byte) bool {
	size := uint64(r.cap)
	need := recSize(len(data))
	if need > size/4 {
		return false
	}
	h := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.head)))
	t := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.tail)))
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
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&r.head)), h+need)
	return true
}

// ringTake hands each message r holds to f, its data copied to Go memory,
// and frees the ring's room once all are handed. The ring's one reader.
func ringTake(r *C.m0_ring, f func(kind int, slot, gen uint32, flags int, data []byte)) {
	size := uint64(r.cap)
	t := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.tail)))
	h := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.head)))
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
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&r.tail)), t)
}
