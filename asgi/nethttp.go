package asgi

import (
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/wire"
	"github.com/m0serve/m0/internal/wsup"
)

// ServeHTTP serves a request that net/http parsed. The body streams: the
// application receives each chunk as it arrives, when it asks for it. A
// client that leaves is told at once (http.disconnect), whether the
// application is waiting on it or sending.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if st := h.unavailable(); st != 0 {
		wire.Error(w, st, true)
		return
	}
	if wsup.IsNetUpgrade(r) {
		h.netWebSocket(w, r)
		return
	}
	if h.maxBody >= 0 && r.ContentLength > h.maxBody {
		wire.Error(w, http.StatusRequestEntityTooLarge, false)
		return
	}
	fe := netExchanges.Get().(*netExchange)
	defer fe.release()
	fe.w, fe.r, fe.body = w, r, r.Body
	if r.ContentLength != 0 {
		// The application may answer while the body still arrives.
		http.NewResponseController(w).EnableFullDuplex()
		if h.maxBody >= 0 {
			fe.body = http.MaxBytesReader(w, r.Body, h.maxBody)
		}
	}
	fe.sc.net(r, h.rootPath)
	x := &fe.x
	*x = exchange{h: h, fe: fe, head: r.Method == http.MethodHead,
		r: h.pick().Start(cpython.AHTTP, fe.sc.end(nil), r.ContentLength != 0)}
	defer x.done()

	ctx := r.Context()
	rep := x.reply(ctx)
	if rep.kind == refuse {
		if rep.status != 0 && ctx.Err() == nil {
			wire.Error(w, rep.status, rep.close)
		}
		return
	}
	wire.NetHeader(w.Header(), rep.hdr, rep.length)
	w.WriteHeader(rep.status)
	switch {
	case rep.noBody:
		return
	case rep.kind == whole:
		w.Write(rep.body)
		return
	case rep.kind == file:
		defer rep.file.Close()
		io.CopyN(w, rep.file, rep.length) // net/http's writer sends a file with sendfile
		return
	}
	rc := http.NewResponseController(w)
	for {
		b, err := x.part(ctx)
		if len(b) > 0 {
			if _, werr := w.Write(b); werr != nil {
				return // the client left: done tells the application
			}
			// A ResponseWriter that cannot flush (a wrapper that hides it)
			// still gets the whole body, later.
			if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				return
			}
		}
		switch {
		case err == io.EOF, err == errGone:
			return
		case err != nil:
			// No chunked terminator: the client must see the body cut.
			panic(http.ErrAbortHandler)
		}
	}
}

// netExchange is the front end of a request net/http parsed.
type netExchange struct {
	x    exchange
	w    http.ResponseWriter
	r    *http.Request
	body io.Reader
	sc   scope
	buf  []byte // a body chunk read for the application
}

var netExchanges = sync.Pool{New: func() any { return &netExchange{} }}

func (fe *netExchange) release() {
	fe.x = exchange{}
	fe.w, fe.r, fe.body = nil, nil, nil
	if cap(fe.sc.b) > 64<<10 {
		fe.sc.b = nil
	}
	netExchanges.Put(fe)
}

func (x *netExchange) feed(r *cpython.Request) int {
	if x.buf == nil {
		x.buf = make([]byte, 64<<10)
	}
	// What has arrived, as soon as anything has: a chunk does not wait to
	// fill the buffer.
	n, err := x.body.Read(x.buf)
	for n == 0 && err == nil {
		n, err = x.body.Read(x.buf)
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		r.Post(cpython.ABody, cpython.FlagMore, x.buf[:n])
	case err == io.EOF:
		r.Post(cpython.ABody, 0, x.buf[:n])
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge
	default: // the body was cut short: the client is gone
		return -1
	}
	return 0
}

// watch is net/http's own: the request's context ends when the client
// leaves.
func (x *netExchange) watch(*cpython.Request) func() { return nil }

func (x *netExchange) describe() (string, string) { return x.r.Method, x.r.URL.Path }
