package wsgi

import (
	"context"
	"errors"
	"io"

	"github.com/m0serve/m0/internal/cpython"
)

// exchange is the server side of one request: how the response is handed
// over, whichever server parsed the request.
type exchange interface {
	// describe names the request in log lines.
	describe() (method, path string)
	// fail answers 500.
	fail()
	// respond sends a whole response: the application's headers (read from
	// t), and body with its measured length.
	respond(t cpython.Thread, status int, body []byte)
	// stream sends a response whose body s produces in parts. It owns s and
	// must see s.close called when the body ends, however it ends.
	stream(t cpython.Thread, status int, s *stream)
}

var errUnavailable = errors.New("wsgi: shutting down")

// serve runs the application for one request on the calling goroutine's OS
// thread and hands the response to x.
func (h *handler) serve(ctx context.Context, x exchange, env *cpython.Environ, body []byte) error {
	slot, ok := h.pool.acquire(ctx)
	if !ok {
		return errUnavailable
	}
	t, res, err := h.app.Call(env, body, h.stream)
	switch {
	case err != nil:
		t.Release()
		h.pool.release(slot)
		h.logError(x, "wsgi: application error", err)
		x.fail()
	case !res.Stream:
		x.respond(t, res.Status, t.Body())
		t.Release()
		h.pool.release(slot)
		if res.Late != nil {
			h.logError(x, "wsgi: close() failed", res.Late)
		}
	default:
		x.stream(t, res.Status, &stream{h: h, x: x, t: t, slot: slot, part: t.Body()})
	}
	return nil
}

// stream is a body the application produces in parts on its thread, which
// it holds, with its pool slot, until close.
type stream struct {
	h      *handler
	x      exchange
	t      cpython.Thread
	slot   int
	part   []byte // the part produced and not yet taken
	ended  bool   // the body is complete, or failed
	failed bool   // it failed after the head went out
	closed bool
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
		res, err := s.t.Next()
		if err != nil {
			s.h.logError(s.x, "wsgi: application error after the response started", err)
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
	if !s.ended {
		if err := s.t.Close(); err != nil {
			s.h.logError(s.x, "wsgi: close() failed", err)
		}
	}
	s.t.Release()
	s.h.pool.release(s.slot)
}

func (h *handler) logError(x exchange, msg string, err error) {
	method, path := x.describe()
	attrs := []any{"method", method, "path", path, "error", err.Error()}
	var pe *cpython.Error
	if errors.As(err, &pe) {
		attrs = append(attrs, "traceback", pe.Traceback)
	}
	h.log.Error(msg, attrs...)
}

// eachHeader calls fn for each header of the application's response that
// the server forwards, and returns the Content-Length it named (-1 for
// none). The server frames the body itself: Content-Length is measured,
// Transfer-Encoding chosen, and trailers are not sent.
func eachHeader(t cpython.Thread, fn func(name, value []byte)) (appLength int64) {
	appLength = -1
	t.Headers(func(name, value []byte) {
		switch {
		case equalFold(name, "Content-Length"):
			appLength = parseLength(value)
		case equalFold(name, "Transfer-Encoding"), equalFold(name, "Keep-Alive"), equalFold(name, "Trailer"):
		default:
			fn(name, value)
		}
	})
	return appLength
}

func parseLength(b []byte) int64 {
	if len(b) == 0 || len(b) > 18 {
		return -1
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// equalFold reports whether the header name b is s, ASCII case ignored.
// Names hold token characters only, so folding bit 0x20 is exact for s made
// of letters and hyphens.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != s[i]|0x20 {
			return false
		}
	}
	return true
}

// bodyAllowed reports whether a response with status may carry a body.
func bodyAllowed(status int) bool {
	return status != 204 && status != 304 && status >= 200
}

const internalError = "Internal Server Error\n"
