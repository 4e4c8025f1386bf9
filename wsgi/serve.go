package wsgi

import (
	"errors"

	"github.com/m0serve/m0/internal/cpython"
)

// job is one request on its way through the pool, whichever server
// parsed it.
type job struct {
	env  cpython.Environ
	body []byte
	x    exchange
	done chan struct{} // the handler's wake-up: the response is in x's hands
}

// exchange is the server side of one request: how the Python thread hands
// the response over. Exactly one of fail, respond and stream(...).end ends it.
type exchange interface {
	// describe names the request in log lines.
	describe() (method, path string)
	// fail answers 500.
	fail()
	// respond sends a whole response: the application's headers (read from
	// t), and body with its measured length.
	respond(t *cpython.Thread, status int, body []byte)
	// stream sends the head of a response whose body follows in parts.
	stream(t *cpython.Thread, status int) streamer
}

// streamer carries a streamed body to the client.
type streamer interface {
	// write sends one part at once; an error means the client has left.
	write(b []byte) error
	// end finishes the body; !ok ends the connection without finishing it,
	// so the client sees truncation.
	end(ok bool)
}

// serve runs on a Python thread: it calls the application and hands the
// response to the exchange, holding the thread through a streamed body.
func (h *handler) serve(t *cpython.Thread, j *job) {
	res, err := t.Call(h.app, &j.env, j.body, h.stream)
	if err != nil {
		h.logError(j.x, "wsgi: application error", err)
		j.x.fail()
		return
	}
	if !res.Stream {
		if res.Late != nil {
			h.logError(j.x, "wsgi: close() failed", res.Late)
		}
		j.x.respond(t, res.Status, t.Body())
		return
	}
	s := j.x.stream(t, res.Status)
	if s.write(t.Body()) == nil {
		for {
			res, err := t.Next()
			if err != nil {
				h.logError(j.x, "wsgi: application error after the response started", err)
				s.end(false)
				return
			}
			if b := t.Body(); len(b) > 0 && s.write(b) != nil {
				break // the client left
			}
			if !res.Stream {
				if res.Late != nil {
					h.logError(j.x, "wsgi: close() failed", res.Late)
				}
				s.end(true)
				return
			}
		}
	}
	if err := t.Close(); err != nil {
		h.logError(j.x, "wsgi: close() failed", err)
	}
	s.end(false)
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
func eachHeader(t *cpython.Thread, fn func(name, value []byte)) (appLength int64) {
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
