package asgi

import (
	"context"
	"io"
	"sync"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/wire"
	"github.com/m0serve/m0/internal/wsup"
	"github.com/valyala/fasthttp"
)

// ServeFastHTTP serves a request that fasthttp parsed: the same bridge as
// ServeHTTP without net/http's costs per request. m0serve's own listener
// uses it. fasthttp has read the whole body (within the server's cap)
// before the handler runs; the application receives it in chunks. A client
// that leaves while the application waits on it is noticed all the same.
//
// A whole body is set for fasthttp to send, not written into its buffer
// (wire.FastBody): a handler that wraps this one replaces it (SetBody),
// never adds to it (ctx.Write drops it), and does not reset the request's
// user values before fasthttp has written the response.
func (h *Handler) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	if st := h.unavailable(); st != 0 {
		wire.FastError(ctx, st, true)
		return
	}
	if wsup.IsFastUpgrade(ctx) {
		h.fastWebSocket(ctx)
		return
	}
	body := ctx.PostBody()
	if h.maxBody >= 0 && int64(len(body)) > h.maxBody {
		wire.FastError(ctx, fasthttp.StatusRequestEntityTooLarge, false)
		return
	}
	fx := fastExchanges.Get().(*fastExchange)
	fx.ctx = ctx
	fx.sc.fast(ctx, h.rootPath)
	first := body
	if len(first) > chunkSize {
		first = first[:chunkSize]
	}
	fx.rest = body[len(first):]
	fx.x = exchange{h: h, fe: fx, head: ctx.IsHead(),
		r: h.pick().Start(cpython.AHTTP, fx.sc.end(first), len(fx.rest) > 0)}
	if fx.respond() {
		fx.release()
	}
	// Otherwise fasthttp reads the body from fx after this returns; fx
	// releases itself in Close.
}

// fastExchange is the front end of a request fasthttp parsed.
type fastExchange struct {
	x    exchange
	ctx  *fasthttp.RequestCtx
	sc   scope
	rest []byte          // the body the application has not asked for yet
	body wire.StreamBody // a streamed body fasthttp reads
}

var fastExchanges = sync.Pool{New: func() any { return &fastExchange{} }}

func (fx *fastExchange) release() {
	fx.x.done()
	fx.x = exchange{}
	fx.ctx, fx.rest = nil, nil
	fx.body.Reset()
	if cap(fx.sc.b) > 64<<10 {
		fx.sc.b = nil
	}
	fastExchanges.Put(fx)
}

func (fx *fastExchange) feed(r *cpython.Request) int {
	chunk := fx.rest
	if len(chunk) > chunkSize {
		chunk = chunk[:chunkSize]
	}
	fx.rest = fx.rest[len(chunk):]
	flags := 0
	if len(fx.rest) > 0 {
		flags = cpython.FlagMore
	}
	r.Post(cpython.ABody, flags, chunk)
	return 0
}

// watch has the connection watched: fasthttp reads nothing while the
// handler runs, so it would not notice the client leave.
func (fx *fastExchange) watch(r *cpython.Request) func() {
	return sock.WatchClose(fx.ctx.Conn(), func() { r.Post(cpython.ADisconnect, 0, nil) })
}

func (fx *fastExchange) describe() (string, string) {
	return string(fx.ctx.Method()), wire.Path(fx.ctx)
}

// respond renders the reply. It reports whether the exchange is over
// (false: fasthttp reads a streamed body from fx, and closes it).
func (fx *fastExchange) respond() bool {
	rep := fx.x.reply(context.Background())
	resp := &fx.ctx.Response
	if rep.kind == refuse {
		wire.FastError(fx.ctx, rep.status, rep.close)
		return true
	}
	resp.Header.SetNoDefaultContentType(true)
	resp.SetStatusCode(rep.status)
	eachHeader(rep.hdr, resp.Header.AddBytesKV)
	switch {
	case rep.noBody:
		// A HEAD, or a status without a body: the head alone, and a stream
		// hears that its client is gone (done) rather than being drained.
		resp.SkipBody = true
		if rep.length >= 0 {
			resp.Header.SetContentLength(int(rep.length))
		}
	case rep.kind == stream && (rep.length >= 0 || !fx.ctx.Request.Header.IsHTTP11()):
		// fasthttp would hold back the parts of a body of known length
		// until its buffer fills, and cannot frame chunks for HTTP/1.0.
		fx.streamDirect(rep)
	case rep.kind == whole:
		wire.FastBody(fx.ctx, rep.body, true) // a copy of the loop's message, this request's alone
	case rep.kind == file:
		resp.SetBodyStream(rep.file, int(rep.length)) // fasthttp closes it, sending it with sendfile
	default:
		resp.SetBodyStream(fx, -1)
		return false
	}
	return true
}

// Read gives fasthttp the next part of a streamed body; it runs on the
// handler's goroutine after the handler returned.
func (fx *fastExchange) Read(p []byte) (int, error) { return fx.body.Read(p, fx.nextPart) }

// nextPart is the application's next part; a client gone is errFailed, on
// which fasthttp ends the connection without the last chunk.
func (fx *fastExchange) nextPart() ([]byte, error) {
	b, err := fx.x.part(context.Background())
	if err == errGone {
		err = errFailed
	}
	return b, err
}

// CountInto has the bytes of a streamed body counted into n, for the
// access log and the metrics.
func (fx *fastExchange) CountInto(n *int64) { fx.body.CountInto(n) }

// Close is fasthttp's word that the body is over, sent or not: a body the
// client left before its end tells the application it is gone.
func (fx *fastExchange) Close() error {
	fx.release()
	return nil
}

var _ io.ReadCloser = (*fastExchange)(nil)

// streamDirect writes a streamed body to the connection itself, part by
// part, each flushed as it comes: for a body of the length the application
// named, and for an HTTP/1.0 client, which cannot read chunks. The
// connection closes after the body, which ends it where no length is named.
func (fx *fastExchange) streamDirect(rep reply) {
	wire.StreamDirect(fx.ctx, rep.status, func(fn func(name, value []byte)) { eachHeader(rep.hdr, fn) }, rep.length, !rep.noBody,
		func() ([]byte, error) { return fx.x.part(context.Background()) })
}
