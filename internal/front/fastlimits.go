package front

import (
	"errors"
	"math"
	"strings"
	"time"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// fastLimits are the fasthttp.Server settings that carry lim.
func fastLimits(s *fasthttp.Server, lim Limits, obs observe.Refuser) {
	rf := &refusals{lim: lim}
	capBytes := lim.maxBody()
	s.MaxRequestBodySize = math.MaxInt
	if capBytes >= 0 && capBytes < math.MaxInt {
		s.MaxRequestBodySize = int(capBytes)
	}
	// ReadTimeout bounds the request line and headers: a new connection's
	// within IdleTimeout of its accept, a kept-alive one's within
	// IdleTimeout of their first byte. IdleTimeout must stay positive for
	// fasthttp to replace the body deadline before the next request.
	s.ReadTimeout = lim.IdleTimeout
	s.IdleTimeout = lim.IdleTimeout
	if s.IdleTimeout <= 0 {
		s.IdleTimeout = forever
	}
	s.MaxRequestsPerConn = lim.MaxKeepaliveRequests
	body := lim.BodyTimeout
	if body <= 0 {
		body = forever
	}
	s.HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
		if h.ContentLength() == 0 || h.ContentLength() == -2 {
			return fasthttp.RequestConfig{}
		}
		return fasthttp.RequestConfig{ReadTimeout: body}
	}
	s.ExpectHandler = func(ctx *fasthttp.RequestCtx) int {
		if capBytes >= 0 && int64(ctx.Request.Header.ContentLength()) > capBytes {
			rf.tooLarge()
			ctx.Error(tooLarge, fasthttp.StatusRequestEntityTooLarge)
			lingerOnClose(ctx.Conn(), lim.linger())
			return fasthttp.StatusRequestEntityTooLarge
		}
		return fasthttp.StatusContinue
	}
	s.ErrorHandler = func(ctx *fasthttp.RequestCtx, err error) {
		answered := true
		defer func() {
			if answered && obs != nil {
				o := observe.Outcome{Status: ctx.Response.StatusCode(), Dur: time.Since(observe.FastStart(ctx)),
					Bytes: int64(len(ctx.Response.Body()))}
				o.Remote = wire.Client(ctx).Addr()
				obs.Refused(string(ctx.Method()), wire.Path(ctx), o)
			}
		}()
		switch {
		case errors.Is(err, fasthttp.ErrBodyTooLarge):
			rf.tooLarge()
			ctx.Error(tooLarge, fasthttp.StatusRequestEntityTooLarge)
			lingerOnClose(ctx.Conn(), lim.linger())
		case isTimeout(err) && headerError(ctx, err):
			// As net/http does: a request whose headers never arrived
			// gets no answer.
			answered = false
			ctx.Conn().Close()
		case isTimeout(err):
			// 408, then the connection closes; closing it here instead
			// would lose a pipelined response fasthttp has not flushed.
			rf.timedOut()
			ctx.Error(timedOut, fasthttp.StatusRequestTimeout)
			ctx.SetConnectionClose()
		case bodyRefusal(err, ctx.Conn()) != nil:
			r := bodyRefusal(err, ctx.Conn())
			ctx.Error(r.Body(), r.Status)
			ctx.SetConnectionClose()
		case errors.As(err, new(*fasthttp.ErrSmallBuffer)):
			ctx.Error("Request Header Fields Too Large\n", fasthttp.StatusRequestHeaderFieldsTooLarge)
		default:
			ctx.Error("Bad Request\n", fasthttp.StatusBadRequest)
		}
	}
}

// headerError reports whether err, a read error fasthttp hands its
// ErrorHandler, arose before the headers were whole: fasthttp wraps the
// errors of a partial header, and hands on bare the error of a new
// connection that sent nothing.
func headerError(ctx *fasthttp.RequestCtx, err error) bool {
	if lc, ok := ctx.Conn().(*limitConn); ok && !lc.readAny.Load() {
		return true
	}
	var nothing fasthttp.ErrNothingRead
	return errors.As(err, &nothing) || strings.Contains(err.Error(), "error when reading request headers")
}
