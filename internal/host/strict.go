package host

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// Both front ends read their connections through wire.StrictListener
// (limitedServer.Serve), so a request the strict reading refuses never
// reaches a handler: its connection hands the front end a request for
// wire.RefusedTarget instead, which the outermost handler answers here
// with the refusal and closes. A request that asked to upgrade and was not
// switched closes its connection too: what the client sent after it was
// not read as HTTP.

// NetConn returns the connection a limitConn wraps (wire.StrictOf).
func (c *limitConn) NetConn() net.Conn { return c.Conn }

// strictFast is the outermost fasthttp handler: it answers a refused
// request, and closes after an upgrade request that did not switch.
func strictFast(h fasthttp.RequestHandler, obs observe.Refuser) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if r := wire.Refused(ctx.Conn(), ctx.Request.Header.RequestURI()); r != nil {
			answerFast(ctx, r, obs)
			return
		}
		if ctx.IsOptions() && string(ctx.Request.Header.RequestURI()) == "*" {
			// The server's own options, answered as net/http answers
			// them: the application is asked about its resources.
			ctx.Response.Header.SetContentLength(0)
			return
		}
		h(ctx)
		if s := wire.StrictOf(ctx.Conn()); s != nil && s.Passing() && !ctx.Hijacked() {
			ctx.SetConnectionClose()
		}
	}
}

// answerFast answers r on ctx and closes the connection after it.
func answerFast(ctx *fasthttp.RequestCtx, r *wire.Refusal, obs observe.Refuser) {
	ctx.Error(r.Body(), r.Status)
	ctx.SetConnectionClose()
	if obs != nil {
		o := observe.Outcome{Status: r.Status, Dur: time.Since(ctx.Time()), Bytes: int64(len(r.Body()))}
		if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
			o.Remote = a.AddrPort().Addr().Unmap()
		}
		method, target := r.Method, r.Target
		if r.InBody {
			method, target = string(ctx.Method()), string(ctx.Path())
		}
		obs.Refused(method, target, o)
	}
}

// bodyRefusal returns the refusal a body's read error is, if it is one.
func bodyRefusal(err error) *wire.Refusal {
	var r *wire.Refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// strictNet answers a refused request on net/http, and reports whether it
// did. A request after which the connection stopped being read as HTTP
// (an upgrade) is answered, if not switched, with Connection: close.
func strictNet(w http.ResponseWriter, r *http.Request, c net.Conn, obs observe.Refuser) bool {
	rf := wire.Refused(c, []byte(r.RequestURI))
	if rf == nil {
		if s := wire.StrictOf(c); s != nil && s.Passing() {
			w.Header().Set("Connection", "close")
		}
		return false
	}
	answerNet(w, r, rf, obs)
	return true
}

// answerNet answers rf on w, closing the connection after it.
func answerNet(w http.ResponseWriter, r *http.Request, rf *wire.Refusal, obs observe.Refuser) {
	start := time.Now()
	body := rf.Body()
	h := w.Header()
	h.Set("Connection", "close")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rf.Status)
	w.Write([]byte(body))
	if obs != nil {
		o := observe.Outcome{Status: rf.Status, Dur: time.Since(start), Bytes: int64(len(body))}
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			o.Remote = ap.Addr().Unmap()
		}
		method, target := rf.Method, rf.Target
		if rf.InBody {
			method, target = r.Method, r.URL.Path
		}
		obs.Refused(method, target, o)
	}
}

// strictConnKey is where ServeStrict keeps a request's connection.
type strictConnKey struct{}

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
		return context.WithValue(ctx, strictConnKey{}, c)
	}
	obs, _ := next.(observe.Refuser)
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(strictConnKey{}).(net.Conn)
		if strictNet(w, r, c, obs) {
			return
		}
		next.ServeHTTP(w, r)
	})
	return srv.Serve(wire.StrictListener(ln))
}
