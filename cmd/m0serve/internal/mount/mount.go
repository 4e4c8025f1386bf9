// Package mount routes requests to the applications mounted under path
// prefixes in one process (m0serve --mount PREFIX=SPEC): the longest
// prefix that claims a path serves it, and a path no mount claims is
// answered 404 in Go.
package mount

import (
	"cmp"
	"fmt"
	"github.com/m0serve/m0/middleware"
	"net/http"
	"slices"
	"strings"

	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// Route is one mount: its prefix ("/" or a path without a trailing slash)
// and what serves it.
type Route struct {
	Prefix  string
	Handler http.Handler
}

// Router serves net/http, and fasthttp when every route's handler does.
type Router struct {
	routes []Route // longest prefix first; "/" is stored as ""
	fast   []fasthttp.RequestHandler
}

// New returns the router of routes. A prefix that does not begin with a
// slash, or that two routes name, is an error.
func New(routes []Route) (*Router, error) {
	r := &Router{}
	seen := map[string]bool{}
	for _, rt := range routes {
		if !strings.HasPrefix(rt.Prefix, "/") {
			return nil, fmt.Errorf("mount prefix %q does not begin with /", rt.Prefix)
		}
		p := strings.TrimRight(rt.Prefix, "/")
		if seen[p] {
			return nil, fmt.Errorf("two mounts at %s", cmp.Or(p, "/"))
		}
		seen[p] = true
		r.routes = append(r.routes, Route{Prefix: p, Handler: rt.Handler})
	}
	slices.SortStableFunc(r.routes, func(a, b Route) int { return cmp.Compare(len(b.Prefix), len(a.Prefix)) })
	for _, rt := range r.routes {
		f, ok := rt.Handler.(middleware.FastHandler)
		if !ok {
			r.fast = nil
			break
		}
		r.fast = append(r.fast, f.ServeFastHTTP)
	}
	return r, nil
}

// match is the index of the route that serves path, or -1.
func (r *Router) match(path string) int {
	for i, rt := range r.routes {
		if _, ok := wire.UnderPrefix(path, rt.Prefix); ok {
			return i
		}
	}
	return -1
}

// ServeHTTP hands req to the mount that claims its path.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	i := r.match(req.URL.Path)
	if i < 0 {
		wire.Error(w, http.StatusNotFound, false)
		return
	}
	r.routes[i].Handler.ServeHTTP(w, req)
}

// Fast reports whether the router serves fasthttp (every mount does).
func (r *Router) Fast() bool { return len(r.fast) == len(r.routes) }

// ServeFastHTTP hands ctx to the mount that claims its path. It panics
// when a mount does not serve fasthttp (Fast says).
func (r *Router) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	if !r.Fast() {
		panic("mount: a mounted handler does not serve fasthttp")
	}
	i := r.match(wire.Path(ctx))
	if i < 0 {
		wire.FastError(ctx, http.StatusNotFound, false)
		return
	}
	r.fast[i](ctx)
}
