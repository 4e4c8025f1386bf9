package cpython

/*
#cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "m0py.h"
*/
import "C"

import (
	"context"
	"log/slog"
	"sync/atomic"
	"unsafe"
)

// go_log is _m0.log: Python writing a line to the server's log.
//
//export go_log
func go_log(level C.int, msg *C.char) {
	slog.Log(context.Background(), slog.Level(level), C.GoString(msg))
}

// Publisher publishes a frame for Python's _m0.publish, with an SSE event
// type ("" for none): its id, and false when the channel refuses it. data
// is valid only during the call.
type Publisher func(channel, event string, data []byte) (id string, ok bool)

var publisher atomic.Pointer[Publisher]

// SetPublisher makes fn what Python's m0pub.publish calls; nil is none (it
// then says the server publishes nowhere).
func SetPublisher(fn Publisher) {
	if fn == nil {
		publisher.Store(nil)
		return
	}
	publisher.Store(&fn)
}

// go_publish is _m0.publish: 1 with the id written to idbuf, 0 when the
// channel refused the frame, -1 without a publisher. event (elen bytes) is
// the frame's SSE event type, elen 0 for none.
//
//export go_publish
func go_publish(channel *C.char, clen C.size_t, event *C.char, elen C.size_t, data *C.char, dlen C.size_t, idbuf *C.char, idlen C.size_t) C.int {
	p := publisher.Load()
	if p == nil {
		return -1
	}
	var d []byte
	if dlen > 0 {
		d = unsafe.Slice((*byte)(unsafe.Pointer(data)), int(dlen))
	}
	var ev string
	if elen > 0 {
		ev = C.GoStringN(event, C.int(elen))
	}
	id, ok := (*p)(C.GoStringN(channel, C.int(clen)), ev, d)
	if !ok {
		return 0
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(idbuf)), int(idlen))
	n := copy(out[:len(out)-1], id)
	out[n] = 0
	return 1
}
