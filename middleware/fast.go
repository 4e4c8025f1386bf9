package middleware

import (
	"net/http"

	"github.com/valyala/fasthttp"
)

// FastHandler is a handler that can also serve requests fasthttp parsed,
// as the bridges, the static handler, the holds and every middleware of
// this package around one can. The m0serve command serves a
// FastHandler with fasthttp, which costs a third of net/http per request.
type FastHandler interface {
	http.Handler
	ServeFastHTTP(ctx *fasthttp.RequestCtx)
}

// SentCounter is implemented by a fasthttp response body stream that counts
// the bytes fasthttp takes from it: CountInto(n) asks it to add each Read's
// count to *n, on the goroutine that reads it, until it is closed. Without
// it, a streamed body of unknown length under fasthttp is logged with bytes
// -1, since fasthttp closes a body stream that is replaced and so one
// cannot be wrapped after the handler set it. A stream of known length is
// counted as that length.
type SentCounter interface {
	CountInto(n *int64)
}
