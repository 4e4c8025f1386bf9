package wire

import (
	"sync"

	"github.com/valyala/fasthttp"
)

// keptMax is the largest whole body FastBody copies into the buffer
// fasthttp keeps for a connection's next response. fasthttp keeps that
// buffer, at the size of the largest body the connection was sent, for as
// long as the connection lives, idle or not: a 6 KiB page left 6 KiB on
// every idle keep-alive connection. A larger body is copied into a buffer
// lent for the write instead, which comes back once fasthttp has written
// the response, so that only the responses being written hold one.
const keptMax = 2 << 10

// lentMax is the largest buffer taken back for another response; a larger
// one is left to the collector.
const lentMax = 1 << 20

// FastBody sets a whole response body under fasthttp. owned says body is
// the caller's to give away (no one changes it afterwards): it is sent as
// it is, with no copy. Otherwise (memory the caller reuses, such as a
// Python thread's buffer) it is copied: a small body into fasthttp's kept
// buffer, a larger one into a lent buffer.
//
// A body set so is replaced by what comes after (SetBody), never added to:
// fasthttp's AppendBody (ctx.Write and the writers built on it) starts
// from its own buffer and drops a body set raw. And a lent buffer comes
// back when the request's user values are closed: whoever resets them
// before fasthttp has written the response (ctx.ResetUserValues in a
// handler that wraps this one) sends whatever another response has put in
// it since.
func FastBody(ctx *fasthttp.RequestCtx, body []byte, owned bool) {
	resp := &ctx.Response
	switch {
	case owned:
		resp.SetBodyRaw(body)
	case len(body) <= keptMax:
		resp.SetBody(body)
	default:
		lb, ok := ctx.UserValue(lentKey{}).(*lentBody)
		if !ok {
			lb = lentBodies.Get().(*lentBody)
			// fasthttp closes the request's user values once it has written
			// the response (bufio copies or writes what it is given, and
			// keeps no reference), or when the connection ends.
			ctx.SetUserValue(lentKey{}, lb)
		}
		lb.b = append(lb.b[:0], body...)
		resp.SetBodyRaw(lb.b)
	}
}

type lentKey struct{}

// lentBody is a buffer lent to one response's body.
type lentBody struct{ b []byte }

var lentBodies = sync.Pool{New: func() any { return new(lentBody) }}

// lentBack, when set (by a test), sees each lent buffer as it comes back.
var lentBack func(b []byte)

// Close takes the buffer back: the response that held it is written.
func (lb *lentBody) Close() error {
	if lentBack != nil {
		lentBack(lb.b)
	}
	if cap(lb.b) > lentMax {
		lb.b = nil
	}
	lb.b = lb.b[:0]
	lentBodies.Put(lb)
	return nil
}
