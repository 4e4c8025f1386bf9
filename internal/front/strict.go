package front

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/internal/strict"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// Both front ends read their connections through strict.Listen
// (limitedServer.Serve), so a request the strict reading refuses never
// reaches a handler: its connection hands the front end a request for
// strict.RefusedTarget instead, which the outermost handler answers here
// with the refusal and closes. After an upgrade request the connection
// reads nothing until the request is answered: the outermost handler tells
// it (StrictConn.Served) when it was answered without a switch.

// NetConn returns the connection a limitConn wraps (strict.Of).
func (c *limitConn) NetConn() net.Conn { return c.Conn }

// strictFast is the outermost fasthttp handler: it answers a refused
// request (lingering on close, so that a client still sending reads its
// answer), reads the body within lim (a failure is answered by refuse, the
// server's ErrorHandler), and tells the connection each request was
// served.
func strictFast(h fasthttp.RequestHandler, obs observe.Refuser, lim Limits, refuse func(*fasthttp.RequestCtx, error)) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if r := strict.Refused(ctx.Conn(), ctx.Request.Header.RequestURI()); r != nil {
			if r.Status == http.StatusRequestEntityTooLarge {
				// --max-body's own 413, logged once, of the request as sent.
				ctx.Request.Header.SetMethod(r.Method)
				ctx.Request.SetRequestURI(r.Target)
				refuse(ctx, fasthttp.ErrBodyTooLarge)
			} else {
				answerFast(ctx, r, obs)
				lingerOnClose(ctx.Conn(), lim.linger())
			}
			ctx.SetConnectionClose()
			return
		}
		if err := readBody(ctx, lim.maxBody()); err != nil {
			refuse(ctx, err)
			ctx.SetConnectionClose()
			return
		}
		if !ctx.IsOptions() || string(ctx.Request.Header.RequestURI()) != "*" {
			h(ctx)
		} else {
			ctx.Response.Header.SetContentLength(0) // asteriskOptions
		}
		if ctx.Hijacked() {
			return
		}
		if s := strict.Of(ctx.Conn()); s != nil {
			s.Served(requestNum(ctx))
		}
		if !ctx.Response.IsBodyStream() {
			wire.AnswerInTurn()
		}
	}
}

var bodyScratch = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody reads a request body fasthttp hands on as a stream, whole and
// within capBytes (negative: no cap), into the request, as it arrives: what
// a slow upload holds is what it sent. The error is fasthttp's
// ErrBodyTooLarge, a read error, or the strict reading's refusal.
func readBody(ctx *fasthttp.RequestCtx, capBytes int64) error {
	req := &ctx.Request
	if !req.IsBodyStream() || req.Header.ContentLength() == 0 {
		return nil
	}
	if n := req.Header.ContentLength(); capBytes >= 0 && int64(n) > capBytes {
		return fasthttp.ErrBodyTooLarge
	}
	var rd io.Reader = ctx.RequestBodyStream()
	if capBytes >= 0 {
		rd = io.LimitReader(rd, capBytes+1)
	}
	buf := bodyScratch.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			bodyScratch.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(rd); err != nil {
		return err
	}
	if capBytes >= 0 && int64(buf.Len()) > capBytes {
		return fasthttp.ErrBodyTooLarge
	}
	if n := req.Header.ContentLength(); n > 0 && buf.Len() != n {
		return io.ErrUnexpectedEOF // the client left before its body was whole
	}
	req.SetBody(buf.Bytes())
	return nil
}

// asteriskOptions: OPTIONS * asks about the server, not a resource, and is
// answered 200 with no body by the server on both front ends, as net/http
// answers it, never by the application.
func asteriskOptions(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.RequestURI == "*"
}

// answerFast answers r on ctx and closes the connection after it.
func answerFast(ctx *fasthttp.RequestCtx, r *strict.Rejection, obs observe.Refuser) {
	wire.FastAnswer(ctx, r.Status, r.Body(), true)
	if obs != nil {
		o := observe.Outcome{Status: r.Status, Dur: time.Since(observe.FastStart(ctx)), Bytes: int64(len(r.Body()))}
		o.Remote = wire.Client(ctx).Addr()
		method, target := r.Method, r.Target
		if r.InBody {
			method, target = string(ctx.Method()), wire.Path(ctx)
		}
		obs.Refused(method, target, o)
	}
}

// bodyRefusal returns the refusal a body's read error on c is, if it is
// one (fasthttp hands some read errors on inside errors of its own).
func bodyRefusal(err error, c net.Conn) *strict.Rejection {
	var r *strict.Rejection
	if errors.As(err, &r) {
		return r
	}
	if s := strict.Of(c); err != nil && s != nil {
		if r := s.Rejection(); r != nil && r.InBody {
			return r
		}
	}
	return nil
}

// strictNet answers on net/http a refused request and OPTIONS *, and
// reports whether it did. (Run the server with DisableGeneralOptionsHandler
// for OPTIONS * to come here.)
func strictNet(w http.ResponseWriter, r *http.Request, c net.Conn, obs observe.Refuser) bool {
	if asteriskOptions(r) {
		w.Header().Set("Content-Length", "0")
		return true
	}
	rf := strict.Refused(c, []byte(r.RequestURI))
	if rf == nil {
		return false
	}
	answerNet(w, r, rf, obs)
	return true
}

// servedNet tells c, if it reads strictly, that request number n was
// served: an upgrade request not switched ends its hold.
func servedNet(c net.Conn, n int) {
	if s := strict.Of(c); s != nil {
		s.Served(n)
	}
}

// answerNet answers rf on w, closing the connection after it.
func answerNet(w http.ResponseWriter, r *http.Request, rf *strict.Rejection, obs observe.Refuser) {
	start := time.Now()
	body := rf.Body()
	wire.Answer(w, rf.Status, body, true)
	if obs != nil {
		o := observe.Outcome{Status: rf.Status, Dur: time.Since(start), Bytes: int64(len(body))}
		o.Remote = wire.ClientOf(r).Addr()
		method, target := rf.Method, rf.Target
		if rf.InBody {
			method, target = r.Method, r.URL.Path
		}
		obs.Refused(method, target, o)
	}
}

// strictConnKey is where ServeStrict keeps a request's connection.
type strictConnKey struct{}

// strictConn is a connection ServeStrict serves and its requests so far.
type strictConn struct {
	c net.Conn
	n int
}

// ServeStrict serves srv on ln with m0serve's strict reading of requests
// (docs/reliability.md): a Go program's own http.Server, refusing what
// m0serve refuses before its handler sees it. It sets srv's Handler (nil:
// http.DefaultServeMux) and ConnContext to wrappers of theirs.
func ServeStrict(srv *http.Server, ln net.Listener) error {
	next := srv.Handler
	if next == nil {
		next = http.DefaultServeMux
	}
	before := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if before != nil {
			ctx = before(ctx, c)
		}
		return context.WithValue(ctx, strictConnKey{}, &strictConn{c: c})
	}
	srv.DisableGeneralOptionsHandler = true
	obs, _ := next.(observe.Refuser)
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc, _ := r.Context().Value(strictConnKey{}).(*strictConn)
		if sc == nil {
			sc = &strictConn{}
		}
		sc.n++
		if !strictNet(w, r, sc.c, obs) {
			next.ServeHTTP(w, r)
		}
		servedNet(sc.c, sc.n)
	})
	return srv.Serve(strict.Listen(ln, 0))
}
