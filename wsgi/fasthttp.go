package wsgi

import (
	"context"
	"io"
	"sync"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// ServeFastHTTP serves a request that fasthttp parsed: the same bridge as
// ServeHTTP without net/http's costs per request. m0serve's own listener
// uses it.
//
// A whole body is set for fasthttp to send, not written into its buffer
// (wire.FastBody): a handler that wraps this one replaces it (SetBody),
// never adds to it (ctx.Write drops it), and does not reset the request's
// user values before fasthttp has written the response.
func (h *Handler) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	x := fastExchanges.Get().(*fastExchange)
	x.ctx = ctx
	body := ctx.PostBody()
	if h.maxBody >= 0 && int64(len(body)) > h.maxBody {
		wire.FastError(ctx, fasthttp.StatusRequestEntityTooLarge, false)
	} else if status := fastEnviron(&x.env, ctx, len(body), &x.scratch, &x.spans, h.script); status != 0 {
		wire.FastError(ctx, status, false)
	} else if err := h.serve(context.Background(), x, &x.env, body); err != nil {
		// Not ctx: its Done closes when the server starts to drain, and a
		// request waiting for a thread then must still be served. A drain's
		// 503 closes the connection; a full pool's keeps it.
		wire.FastError(ctx, fasthttp.StatusServiceUnavailable, err != errBusy)
	}
	if x.s == nil {
		x.release()
	}
	// Otherwise fasthttp reads the body from x after this returns, on this
	// goroutine, still locked to the thread that runs it; x releases itself.
}

// fastExchange is a request that fasthttp parsed.
type fastExchange struct {
	ctx     *fasthttp.RequestCtx
	env     cpython.Environ
	scratch []byte
	spans   [][4]int // the headers' offsets into scratch (fastEnviron)
	s       *stream  // a streamed body fasthttp reads
	body    wire.StreamBody
}

var fastExchanges = sync.Pool{New: func() any { return &fastExchange{} }}

func (x *fastExchange) release() {
	x.ctx, x.s = nil, nil
	x.body.Reset()
	if cap(x.env.B) > keep {
		x.env.B = nil
	}
	if cap(x.spans) > 64 {
		x.spans = nil
	}
	fastExchanges.Put(x)
}

func (x *fastExchange) describe() (string, string) {
	return string(x.ctx.Method()), wire.Path(x.ctx)
}

func (x *fastExchange) fail(status int) { wire.FastError(x.ctx, status, false) }

func (x *fastExchange) head() bool { return x.ctx.IsHead() }

// send renders rep. A stream on HTTP/1.1 gives fasthttp a reader it pulls
// the parts from, which it frames as chunks and flushes one by one (for a
// HEAD, a 1xx, 204 or 304 it reads none); on HTTP/1.0 the parts are
// written to the connection as they come, and it closes after the last.
func (x *fastExchange) send(t cpython.Thread, rep reply) {
	if rep.s != nil && !x.ctx.Request.Header.IsHTTP11() {
		x.stream10(t, rep)
		return
	}
	resp := &x.ctx.Response
	resp.Header.SetNoDefaultContentType(true)
	resp.SetStatusCode(rep.status)
	eachHeader(t, resp.Header.AddBytesKV)
	switch {
	case rep.s != nil:
		x.s = rep.s
		rep.s.watch(func(gone func()) func() { return sock.WatchClose(x.ctx.Conn(), gone) })
		resp.SetBodyStream(x, -1)
	case rep.noBody:
		resp.SkipBody = true
		if rep.length >= 0 {
			resp.Header.SetContentLength(int(rep.length))
		}
	default:
		wire.FastBody(x.ctx, rep.body, false) // the thread's buffer, reused by its next call
	}
}

// Read gives fasthttp the next part of a streamed body. It runs on the
// handler's goroutine after the handler returned, still on its thread; an
// error (errFailed) has fasthttp end the connection without the last chunk.
func (x *fastExchange) Read(p []byte) (int, error) { return x.body.Read(p, x.s.next) }

// CountInto has the bytes of a streamed body counted into n, for the
// access log and the metrics.
func (x *fastExchange) CountInto(n *int64) { x.body.CountInto(n) }

// Close is fasthttp's word that the body is over, sent or not.
func (x *fastExchange) Close() error {
	x.s.close()
	x.release()
	return nil
}

func (x *fastExchange) stream10(t cpython.Thread, rep reply) {
	s := rep.s
	defer s.close()
	s.watch(func(gone func()) func() { return sock.WatchClose(x.ctx.Conn(), gone) })
	next := s.next
	if rep.noBody {
		next = nil
	}
	wire.StreamDirect(x.ctx, rep.status, func(fn func(name, value []byte)) { eachHeader(t, fn) }, -1, true, next)
}

var _ io.ReadCloser = (*fastExchange)(nil)
