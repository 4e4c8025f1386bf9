package wsgi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/wire"
)

// exchange is the server side of one request: how the response is handed
// over, whichever server parsed the request. The handler decides the
// response (decide); the exchange renders it.
type exchange interface {
	// describe names the request in log lines.
	describe() (method, path string)
	// head tells a HEAD request.
	head() bool
	// fail answers status: 500, or a timeout's 504.
	fail(status int)
	// send renders rep, with the application's headers read from t. With a
	// stream (rep.s), it owns the stream and must see s.close called when
	// the body ends, however it ends.
	send(t cpython.Thread, rep reply)
}

// reply is a response as the handler decided it, the same for both front
// ends.
type reply struct {
	status int
	length int64   // the Content-Length to send; -1 none (a stream is framed by the server)
	body   []byte  // a whole body, when one is sent
	s      *stream // a body the application produces in parts, or nil
	noBody bool    // nothing follows the head: a HEAD, a 1xx, 204 or 304
}

// decide makes the reply to a response whose status the application gave:
// a whole body (s nil) or a stream. The one HEAD and Content-Length rule
// is wire.Length's; a stream's parts are produced only where a body goes
// out.
func decide(head bool, t cpython.Thread, status int, s *stream) reply {
	if s != nil {
		return reply{status: status, length: -1, s: s, noBody: head || !bodyAllowed(status)}
	}
	body := t.Body()
	length, send := wire.LengthOf(head, status, t.Head(), int64(len(body)))
	if !send {
		body = nil
	}
	return reply{status: status, length: length, body: body, noBody: !send}
}

var (
	errUnavailable = errors.New("wsgi: shutting down")
	errBusy        = errors.New("wsgi: no thread free within the wait bound")
	errWrongThread = errors.New("wsgi: ServeFastHTTP must run on fasthttp's own goroutine (not under a wrapper such as TimeoutHandler)")
)

// serve runs the application for one request on the calling goroutine's OS
// thread (or, with no pool, on the one Python thread) and hands the
// response to x.
//
// Its frames are kept small on purpose: an idle keep-alive connection
// keeps the stack its deepest request grew, and the response's head is
// written at the bottom of fasthttp's 832-byte serveConn frame. The call
// (run) returns before the response is written (reply), so that writing it
// stays within a 4 KiB goroutine stack rather than growing every
// connection's to 8 KiB (docs/profiles.md, "Memory per idle connection").
func (h *Handler) serve(ctx context.Context, x exchange, env *cpython.Environ, body []byte) error {
	slot, why := h.pool.slots.acquire(ctx)
	switch why {
	case given:
	case waitedOut:
		return errBusy
	default:
		return errUnavailable
	}
	if h.pool.one != nil {
		h.serveOne(x, env, body, slot)
		return nil
	}
	t, res, err, answered := h.run(x, env, body, slot)
	if !answered {
		h.reply(x, t, res, err, slot)
	}
	return nil
}

// run calls the application on this goroutine's OS thread, under the
// pool's timeout; answered means the timeout answered the request, and the
// thread and slot are released.
//
//go:noinline
func (h *Handler) run(x exchange, env *cpython.Environ, body []byte, slot int) (cpython.Thread, cpython.Result, error, bool) {
	t := h.app.Reserve()
	w := h.watchStart(x, slot, t)
	t, res, err := h.app.CallOn(t, env, body, h.pool.stream)
	if h.watchEnd(x, slot, w, t, err) {
		t.Release()
		h.pool.slots.release(slot)
		return t, res, err, true
	}
	return t, res, err, false
}

// reply hands the response of a call to x: whole, or as a stream that
// releases the thread and slot at its end.
//
//go:noinline
func (h *Handler) reply(x exchange, t cpython.Thread, res cpython.Result, err error, slot int) {
	if err == nil && res.Stream {
		h.replyStream(x, t, res.Status, slot)
		return
	}
	defer h.pool.slots.release(slot)
	defer t.Release()
	h.finish(x, t, res, err)
}

// replyStream hands x a body the application produces in parts.
//
//go:noinline
func (h *Handler) replyStream(x exchange, t cpython.Thread, status, slot int) {
	x.send(t, decide(x.head(), t, status, &stream{h: h, x: x, t: t, slot: slot, part: t.Body()}))
}

// serveOne serves the request on the one Python thread (NoPool).
//
//go:noinline
func (h *Handler) serveOne(x exchange, env *cpython.Environ, body []byte, slot int) {
	defer h.pool.slots.release(slot)
	h.pool.one.do(func() {
		t := h.app.Reserve()
		w := h.watchStart(x, slot, t)
		t, res, err := h.app.CallOn(t, env, body, false)
		defer t.Release()
		if !h.watchEnd(x, slot, w, t, err) {
			h.finish(x, t, res, err)
		}
	})
}

// watchStart puts the request about to run in slot, on t (Reserve's) or
// this OS thread, under the pool's timeout, if it has one.
func (h *Handler) watchStart(x exchange, slot int, t cpython.Thread) *watched {
	if h.pool.slots.timeout.Load() == 0 {
		return nil
	}
	method, path := x.describe()
	return h.pool.slots.watchStart(slot, method, path, t)
}

// watchEnd takes the request out from under the timeout once the
// application's call returned, and reports whether it answered it: 504
// and one log line (its stack went out when it was interrupted) for a call
// the interrupt ended. An interrupt set just as the response began is taken
// back, and the response goes out whole.
func (h *Handler) watchEnd(x exchange, slot int, w *watched, t cpython.Thread, err error) bool {
	if !h.pool.slots.watchEnd(slot, w) {
		return false
	}
	if err == nil {
		t.ClearInterrupt()
		return false
	}
	method, path := x.describe()
	h.log.Error(h.named("wsgi: request timed out"), "method", method, "path", path)
	x.fail(http.StatusGatewayTimeout)
	return true
}

// finish hands a buffered response, or the failure, to x.
func (h *Handler) finish(x exchange, t cpython.Thread, res cpython.Result, err error) {
	if err != nil {
		h.logError(x, "wsgi: application error", err)
		x.fail(http.StatusInternalServerError)
		return
	}
	x.send(t, decide(x.head(), t, res.Status, nil))
	if res.Late != nil {
		h.logError(x, "wsgi: close() failed", res.Late)
	}
}

// thread is the one Python thread of a handler without a pool: an OS
// thread of its own, for life, so every request sees the same thread.
type thread struct{ work chan func() }

func newThread(rt *cpython.Runtime) *thread {
	th := &thread{work: make(chan func())}
	rt.Go(func(cpython.Thread) {
		for f := range th.work {
			f()
		}
	})
	return th
}

// do runs f on the thread and waits; a panic in f is raised again here.
func (th *thread) do(f func()) {
	done := make(chan any, 1)
	th.work <- func() {
		defer func() { done <- recover() }()
		f()
	}
	if p := <-done; p != nil {
		panic(p)
	}
}

// stream is a body the application produces in parts on its thread, which
// it holds, with its pool slot, until close.
type stream struct {
	h      *Handler
	x      exchange
	t      cpython.Thread
	slot   int
	part   []byte // the part produced and not yet taken
	ended  bool   // the body is complete, or failed
	failed bool   // it failed after the head went out
	closed bool
	stop   func() // ends the watch on the client

	mu   sync.Mutex
	gone bool // the client left, and the application was interrupted
	done bool // close has begun: no more interrupts
}

// watch has s told when the client leaves: the front end calls it with
// what starts the watch (sock.WatchClose, or the request's context).
func (s *stream) watch(start func(gone func()) (stop func())) { s.stop = start(s.clientGone) }

// clientGone interrupts the application producing the body: it may be
// waiting for data and producing nothing, so a write would not tell it the
// client left for as long as it waits.
func (s *stream) clientGone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done && !s.gone {
		s.gone = s.t.Interrupt()
	}
}

func (s *stream) interrupted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

// errFailed ends a body whose application failed after the head.
var errFailed = errors.New("wsgi: the application failed after the response started")

// next returns the next part of the body: io.EOF at its end, errFailed if
// the application failed (the error is logged). A part views C memory and
// is valid until the next call.
func (s *stream) next() ([]byte, error) {
	for {
		if len(s.part) > 0 {
			b := s.part
			s.part = nil
			return b, nil
		}
		if s.ended {
			if s.failed {
				return nil, errFailed
			}
			return nil, io.EOF
		}
		if !s.t.Current() {
			// The body is read on another OS thread than the one its
			// thread state belongs to: a wrapper moved the handler.
			s.h.logError(s.x, "wsgi: a streamed body was read off its thread", errWrongThread)
			s.ended, s.failed = true, true
			continue
		}
		res, err := s.t.Next()
		if err != nil {
			if !s.interrupted() { // the client left: the GeneratorExit is ours
				s.h.logError(s.x, "wsgi: application error after the response started", err)
			}
			s.ended, s.failed = true, true
			continue
		}
		s.part = s.t.Body()
		if !res.Stream {
			s.ended = true
			if res.Late != nil {
				s.h.logError(s.x, "wsgi: close() failed", res.Late)
			}
		}
	}
}

// close ends the stream: close() is called on a body the client left
// before its end, and the thread and its slot are given back.
func (s *stream) close() {
	if s.closed {
		return
	}
	s.closed = true
	s.mu.Lock()
	s.done = true
	gone := s.gone
	s.mu.Unlock()
	if s.stop != nil {
		s.stop()
	}
	if !s.ended && s.t.Current() {
		// close() takes back an interrupt not raised yet, first.
		if err := s.t.Close(); err != nil {
			s.h.logError(s.x, "wsgi: close() failed", err)
		}
	} else if gone {
		// The client left as the body ended: the interrupt may not have
		// been raised, and the thread goes on to other requests.
		s.t.ClearInterrupt()
	}
	s.t.Release()
	s.h.pool.slots.release(s.slot)
}

func (h *Handler) logError(x exchange, msg string, err error) {
	method, path := x.describe()
	attrs := []any{"method", method, "path", path}
	var pe *cpython.Error
	if errors.As(err, &pe) {
		attrs = append(attrs, cpython.LogAttrs(pe.Traceback)...)
	} else {
		attrs = append(attrs, "error", err.Error())
	}
	h.log.Error(h.named(msg), attrs...)
}

// named is a log message of the bridge's ("wsgi: ...") as the handler says
// it: with Options.LogPrefix in place of "wsgi".
func (h *Handler) named(msg string) string {
	if h.prefix != "" {
		msg = h.prefix + strings.TrimPrefix(msg, "wsgi")
	}
	return msg
}

// eachHeader calls fn for each header of the application's response that
// the server forwards. The server frames the body itself: Content-Length is
// decided, Transfer-Encoding chosen, and trailers are not sent.
func eachHeader(t cpython.Thread, fn func(name, value []byte)) { wire.Forward(t.Head(), fn) }

var (
	equalFold   = wire.EqualFold[[]byte]
	bodyAllowed = wire.BodyAllowed
)
