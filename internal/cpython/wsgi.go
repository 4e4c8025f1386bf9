package cpython

/*
#include "m0py.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"unsafe"

	"github.com/m0serve/m0/internal/wire"
)

// EnvironKeys are the environ keys a request buffer names by number
// (EnvironKeys[i] is key i+1); the interpreter interns them once.
var EnvironKeys = []string{
	"REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "CONTENT_TYPE",
	"CONTENT_LENGTH", "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL", "REMOTE_ADDR",
	"REMOTE_PORT", "REQUEST_URI", "RAW_URI",
	"HTTP_HOST", "HTTP_USER_AGENT", "HTTP_ACCEPT", "HTTP_ACCEPT_ENCODING",
	"HTTP_ACCEPT_LANGUAGE", "HTTP_CONNECTION", "HTTP_COOKIE", "HTTP_REFERER",
	"HTTP_CACHE_CONTROL", "HTTP_ORIGIN", "HTTP_AUTHORIZATION", "HTTP_X_FORWARDED_FOR",
	"HTTP_X_FORWARDED_PROTO", "HTTP_X_REQUESTED_WITH", "HTTP_IF_NONE_MATCH",
	"HTTP_IF_MODIFIED_SINCE", "HTTP_UPGRADE_INSECURE_REQUESTS", "HTTP_PRAGMA",
	"HTTP_SEC_FETCH_MODE", "HTTP_SEC_FETCH_SITE", "HTTP_SEC_FETCH_DEST", "HTTP_DNT",
	"HTTP_X_CSRFTOKEN", "HTTP_RANGE",
}

var keyIDs = func() map[string]byte {
	m := make(map[string]byte, len(EnvironKeys))
	for i, k := range EnvironKeys {
		m[k] = byte(i + 1)
	}
	return m
}()

// KeyID returns the number of a known environ key, or 0.
func KeyID(key string) byte { return keyIDs[key] }

// Environ builds the packed request buffer a WSGI call turns into an environ:
// entries of [u8 key id][u16 len, key if the id is 0][u32 len][value], every
// string read as latin-1.
type Environ struct{ B []byte }

// Reset empties the buffer for reuse.
func (e *Environ) Reset() { e.B = e.B[:0] }

// Add appends key=value.
func (e *Environ) Add(key, value string) {
	if id := keyIDs[key]; id != 0 {
		e.B = append(e.B, id)
	} else {
		e.B = append(e.B, 0)
		e.B = binary.LittleEndian.AppendUint16(e.B, uint16(len(key)))
		e.B = append(e.B, key...)
	}
	e.AddValue(value)
}

// AddID appends a known key by its number.
func (e *Environ) AddID(id byte, value string) {
	e.B = append(e.B, id)
	e.AddValue(value)
}

// AddHeader appends a request header under its CGI name: HTTP_ and the name
// upper-cased with hyphens as underscores; Content-Type and Content-Length
// without the prefix.
func (e *Environ) AddHeader(name, value string) {
	if len(name) > maxKey {
		return // no server passes such a name; the packed length could not hold it
	}
	e.B = append(e.B, 0)
	at := len(e.B)
	e.B = append(e.B, 0, 0)
	if !wire.EqualFold(name, "Content-Type") && !wire.EqualFold(name, "Content-Length") {
		e.B = append(e.B, "HTTP_"...)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '-':
			c = '_'
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		}
		e.B = append(e.B, c)
	}
	key := e.B[at+2:]
	if id := keyIDs[string(key)]; id != 0 { // no allocation: a map index by a converted slice
		e.B = append(e.B[:at-1], id)
	} else {
		binary.LittleEndian.PutUint16(e.B[at:], uint16(len(key)))
	}
	e.AddValue(value)
}

// maxKey is the longest key a packed entry holds, "HTTP_" included.
const maxKey = 0xffff - len("HTTP_")

// AddValue appends a value to the key just added; a value may be given in
// parts with AppendValue.
func (e *Environ) AddValue(value string) {
	e.B = binary.LittleEndian.AppendUint32(e.B, uint32(len(value)))
	e.B = append(e.B, value...)
}

var keysOnce sync.Once

// WSGI is an application ready to be called as WSGI on any thread.
type WSGI struct {
	app  Object
	tmpl Object
	rt   *Runtime
	subs []subApp // with subinterpreters, the application in each, by index - 1
}

// NewWSGI prepares app for WSGI calls: the environ template holds the
// wsgi.* keys that never change.
func (rt *Runtime) NewWSGI(app *App, multithread, multiprocess bool) (*WSGI, error) {
	w := &WSGI{app: app.obj, rt: rt}
	err := rt.Main(func(t Thread) error {
		var err error
		keysOnce.Do(func() { err = setKeys(t) })
		if err != nil {
			return err
		}
		w.tmpl = Object(C.m0_wsgi_template(t.c, cbool(multithread), cbool(multiprocess)))
		if w.tmpl == 0 {
			return t.err()
		}
		return nil
	})
	if err == nil && len(rt.subs) > 0 {
		w.subs, err = rt.loadSubs(app)
		app.inSubs = err == nil
	}
	return w, err
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Result is the state of a WSGI response on its thread. Its byte slices view
// C memory and are valid only until the thread's next call.
type Result struct {
	Status int
	Stream bool // more body follows: call Next until it returns false
	// Failure after the response was complete (close() raised), to be logged.
	Late error
}

// Call locks the calling goroutine to its OS thread and calls the
// application there with the packed request and body. It is the whole
// per-request crossing for a buffered response: environ built, the
// application called, start_response captured and the body gathered. The
// Thread it returns holds the response and must be released, whatever the
// error.
func (w *WSGI) Call(env *Environ, body []byte, allowStream bool) (Thread, Result, error) {
	return w.CallOn(w.Reserve(), env, body, allowStream)
}

// Reserve picks the thread the next call will run on when the application
// runs in subinterpreters: this goroutine's OS thread, locked to it, in
// the least busy interpreter, which the caller hands to CallOn and lets go
// of with Release. Without subinterpreters it is the zero Thread: CallOn
// locks the caller's own.
func (w *WSGI) Reserve() Thread {
	if w.subs == nil {
		return Thread{}
	}
	return w.rt.reserve()
}

// CallOn is Call on the thread Reserve gave.
func (w *WSGI) CallOn(t Thread, env *Environ, body []byte, allowStream bool) (Thread, Result, error) {
	var req, b *C.char
	if len(env.B) > 0 {
		req = (*C.char)(unsafe.Pointer(&env.B[0]))
	}
	if len(body) > 0 {
		b = (*C.char)(unsafe.Pointer(&body[0]))
	}
	if t.sub != nil {
		a := w.subs[t.sub.k-1]
		rc := C.m0_wsgi_call_on(t.c, C.uintptr_t(a.app), C.uintptr_t(a.tmpl), req, C.size_t(len(env.B)),
			b, C.size_t(len(body)), cbool(allowStream))
		res, err := t.result(rc)
		return t, res, err
	}
	runtime.LockOSThread()
	t = Thread{c: C.m0_wsgi_call(C.uintptr_t(w.app), C.uintptr_t(w.tmpl), req, C.size_t(len(env.B)),
		b, C.size_t(len(body)), cbool(allowStream))}
	if t.c == nil {
		return t, Result{}, errors.New("cpython: cannot create a thread state")
	}
	res, err := t.result(t.c.rc)
	return t, res, err
}

// Next produces the next chunk of a streamed body into Body. It returns
// Stream false at the end, when close() has been called.
func (t Thread) Next() (Result, error) {
	return t.result(C.m0_wsgi_next(t.c))
}

// Close calls close() on a streamed body the client left before its end.
// The error, if any, is what close() raised.
func (t Thread) Close() error {
	C.m0_wsgi_close(t.c)
	if t.c.err.len > 0 {
		return t.err()
	}
	return nil
}

func (t Thread) result(rc C.int) (Result, error) {
	r := Result{Status: int(t.c.status)}
	switch rc {
	case C.M0_WSGI_ERROR:
		return r, t.err()
	case C.M0_WSGI_STREAM:
		r.Stream = true
	}
	if t.c.err.len > 0 {
		r.Late = t.err()
	}
	return r, nil
}

// Body is the body buffered by the last call, or the chunk Next produced.
func (t Thread) Body() []byte {
	if t.c.body.len == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(t.c.body.p)), int(t.c.body.len))
}

// Head is the response headers of the last call, packed (wire.EachPacked).
// It views C memory, valid until the thread's next call.
func (t Thread) Head() []byte {
	if t.c.head.len == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(t.c.head.p)), int(t.c.head.len))
}

// Interrupt raises GeneratorExit in the Python code t runs, at its next
// bytecode: the application producing a streamed body hears that the
// client left, even while it waits for data and produces nothing. It is
// called from another goroutine than t's, with t's request still in
// progress; Close, or t's next call, takes back an exception not yet
// raised. A thread blocked inside one C call (a lock with no timeout)
// hears of it when the call returns.
func (t Thread) Interrupt() bool {
	var n C.int
	t.control(func(me Thread) { n = C.m0_wsgi_interrupt(me.c, t.c) })
	return n > 0
}

// Ident is t's thread id as Python knows it (threading.get_ident), as
// faulthandler names the thread in a dump.
func (t Thread) Ident() uint64 { return uint64(t.c.ident) }

// TimedOut reports that t's request has run past its bound: header, then
// every Python thread's stack (faulthandler), on standard error as one
// record, and raises _m0.RequestTimeout in the code t runs at its next
// bytecode, as Interrupt raises GeneratorExit. From another goroutine than
// t's, with t's request in progress; t's next call takes back an exception
// not yet raised. It reports whether the exception was set.
func (t Thread) TimedOut(header string) bool {
	var n C.int
	t.control(func(me Thread) {
		me.CallHelperStr("_timed_out", header)
		n = C.m0_wsgi_timeout(me.c, t.c)
	})
	return n > 0
}

// ClearInterrupt takes back an Interrupt that was not raised yet: the
// body ended before the application ran again. From any goroutine.
func (t Thread) ClearInterrupt() {
	t.control(func(me Thread) { C.m0_wsgi_clear_interrupt(me.c, t.c) })
}
