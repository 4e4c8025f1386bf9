package front

import (
	"errors"
	"math"
	"net"
	"strings"
	"time"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/internal/sock"
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
	// The idle wait and the request line and headers are bounded by the
	// connection's state changes (fastDeadline), not by fasthttp's
	// ReadTimeout and IdleTimeout, which read the clock twice a request.
	s.ReadTimeout, s.IdleTimeout = 0, 0
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
		case cameBack(ctx):
			// Nothing of a next request reached fasthttp (park.go), as
			// on a kept-alive connection that never left: no answer.
			answered = false
			ctx.Conn().Close()
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

// fastDeadline sets the read deadline of a connection fasthttp serves as
// its state changes to p, in place of fasthttp's ReadTimeout and
// IdleTimeout: the request line and headers arrive within idle of the
// accept on a new connection, and within idle of their first byte on a
// kept-alive one (of the answer before them, for a head read ahead while
// that was answered); a kept-alive connection waits idle for its next
// request. Zero or less is no bound. On a connection from a Limits
// listener the times are the marks its reads and its state already took,
// and the deadline is only asked for (sock.ReadDeadline): no clock is
// read and, most requests, no timer moves. The bounds hold for
// connections the server accepts (Serve): fasthttp's ServeConn reports no
// new connection.
func fastDeadline(c net.Conn, p connPhase, idle time.Duration) {
	lc, ok := c.(*limitConn)
	if !ok {
		// Another listener's connection: the clock read at each change,
		// and a kept-alive head bounded by its idle wait.
		switch {
		case p != phaseNew && p != phaseIdle:
		case idle > 0:
			c.SetReadDeadline(time.Now().Add(idle))
		case p == phaseIdle:
			c.SetReadDeadline(time.Time{}) // a body's deadline, replaced
		}
		return
	}
	var from int64 // a sock.Mono reading
	switch p {
	case phaseNew:
		from = sock.MonoOf(lc.accepted)
	case phaseActive:
		if !lc.kept.Load() {
			return // a new connection's bound holds from its accept
		}
		// The first bytes' mark; for a head read ahead while the request
		// before it was answered (no read since), the answer's.
		from = max(lc.started.Load(), lc.idleSince.Load())
	case phaseIdle:
		lc.kept.Store(true)
		from = lc.idleSince.Load()
	default:
		return
	}
	var t time.Time
	if idle > 0 {
		t = sock.MonoTime(from + int64(idle))
	}
	lc.rd.Set(lc.Conn, t)
}
