package wsgi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/wire"
)

// netExchange is a request that net/http parsed.
type netExchange struct {
	w     http.ResponseWriter
	r     *http.Request
	env   cpython.Environ
	buf   []byte // the request body, then a large response body to write
	out   []byte // a large response body, written after the thread is free
	abort bool   // end the connection without finishing the body
}

var netExchanges = sync.Pool{New: func() any { return &netExchange{} }}

// keep bounds what a pooled exchange holds on to between requests.
const keep = 64 << 10

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := netExchanges.Get().(*netExchange)
	defer x.release()
	x.w, x.r = w, r

	pathInfo, ok := wire.UnderPrefix(r.URL.Path, h.script)
	if !ok {
		wire.Error(w, http.StatusNotFound, false)
		return
	}
	if h.maxBody >= 0 && r.ContentLength > h.maxBody {
		wire.Error(w, http.StatusRequestEntityTooLarge, false)
		return
	}
	var body []byte
	if r.ContentLength != 0 {
		rd := r.Body
		if h.maxBody >= 0 {
			rd = http.MaxBytesReader(w, r.Body, h.maxBody)
		}
		b, err := readAll(x.buf[:0], rd)
		x.buf = b
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				wire.Error(w, http.StatusRequestEntityTooLarge, false)
			} else {
				wire.Error(w, http.StatusBadRequest, false)
			}
			return
		}
		body = b
	}
	netEnviron(&x.env, r, len(body), h.script, pathInfo)

	if err := h.serve(r.Context(), x, &x.env, body); err != nil {
		if r.Context().Err() == nil {
			wire.Error(w, http.StatusServiceUnavailable, err != errBusy)
		}
		return
	}
	if x.abort {
		// No chunked terminator: the client must see truncation.
		panic(http.ErrAbortHandler)
	}
	if len(x.out) > 0 {
		w.Write(x.out)
	}
	wire.AnswerInTurn()
}

func readAll(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

func (x *netExchange) release() {
	x.w, x.r, x.abort = nil, nil, false
	if cap(x.buf) > keep {
		x.buf = nil
	}
	if cap(x.out) > keep {
		x.out = nil
	}
	x.out = x.out[:0]
	if cap(x.env.B) > keep {
		x.env.B = nil
	}
	netExchanges.Put(x)
}

func (x *netExchange) describe() (string, string) { return x.r.Method, x.r.URL.Path }

func (x *netExchange) fail(status int) { wire.Error(x.w, status, false) }

// smallBody is written at once: it fits the response buffer, so the write
// cannot block on a slow client while the thread is held. A larger one is
// copied and written after the thread is free.
const smallBody = 2048

func (x *netExchange) head() bool { return x.r.Method == http.MethodHead }

// send renders rep. A stream's parts are each written and flushed as they
// come.
func (x *netExchange) send(t cpython.Thread, rep reply) {
	if rep.s != nil {
		defer rep.s.close()
	}
	wire.NetHeader(x.w.Header(), t.Head(), rep.length)
	x.w.WriteHeader(rep.status)
	switch {
	case rep.noBody:
		// Nothing goes out, so no part is produced.
	case rep.s != nil:
		x.stream(rep.s)
	case len(rep.body) <= smallBody:
		x.w.Write(rep.body)
	default:
		x.out = append(x.out[:0], rep.body...)
	}
}

func (x *netExchange) stream(s *stream) {
	s.watch(func(gone func()) func() {
		stop := context.AfterFunc(x.r.Context(), gone)
		return func() { stop() }
	})
	rc := http.NewResponseController(x.w)
	for {
		b, err := s.next()
		if err != nil {
			x.abort = err == errFailed
			return
		}
		if _, err := x.w.Write(b); err != nil {
			return
		}
		// A ResponseWriter that cannot flush (a wrapper that hides it) still
		// gets the whole body, later.
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return
		}
	}
}
