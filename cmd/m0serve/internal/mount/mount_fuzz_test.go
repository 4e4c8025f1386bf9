package mount

import (
	"bufio"
	"cmp"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// FuzzRouter: New takes prefixes that begin with a slash, each normalised
// once (trailing slashes off, "/" as ""; normalising again changes
// nothing) and none twice; a path goes to the longest prefix it lies under
// (wire.UnderPrefix, as the bridges cut SCRIPT_NAME and root_path), or to
// none; and a request target reaches the same mount under both front
// ends.
func FuzzRouter(f *testing.F) {
	for _, c := range [][4]string{
		{"/api", "/api/v2/", "/", "/api/v2/x"},
		{"/a", "/a/", "/b", "/a"},
		{"/static/files", "/flask", "/x//", "/flask/a/b?q=1"},
		{"/a", "/b", "/c", "/a/../b/x"},
		{"/a", "/b", "", "//a/x"},
		{"/a", "/%41", "/b", "/%41/x"},
		{"/a b", "/a%2Fb", "/c", "/a%2Fb"},
		{"a", "/b", "/c", "/b"},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, p1, p2, p3, target string) {
		var routes []Route
		norm := map[string]int{}
		for i, p := range []string{p1, p2, p3} {
			if p == "" {
				continue
			}
			routes = append(routes, Route{Prefix: p, Handler: named(rune('0' + i))})
		}
		r, err := New(routes)
		dup := false
		for _, rt := range routes {
			n := strings.TrimRight(rt.Prefix, "/")
			norm[n]++
			dup = dup || norm[n] > 1
			if !strings.HasPrefix(rt.Prefix, "/") {
				if err == nil {
					t.Fatalf("New took prefix %q", rt.Prefix)
				}
				return
			}
		}
		if dup != (err != nil) {
			t.Fatalf("New(%q): %v (two prefixes alike: %v)", routes, err, dup)
		}
		if err != nil {
			return
		}
		for _, rt := range r.routes {
			// Normalised once: the route's prefix given again is itself.
			again, err := New([]Route{{Prefix: cmp.Or(rt.Prefix, "/"), Handler: rt.Handler}})
			if err != nil || again.routes[0].Prefix != rt.Prefix {
				t.Fatalf("prefix %q normalised again: %v, %v", rt.Prefix, again, err)
			}
		}
		route := func(path string) string {
			best, name := -1, ""
			for _, rt := range r.routes {
				if _, ok := wire.UnderPrefix(path, rt.Prefix); ok && len(rt.Prefix) > best {
					best, name = len(rt.Prefix), string(rt.Handler.(named))
				}
			}
			return name
		}
		if !strings.HasPrefix(target, "/") {
			return
		}
		head := "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n"
		nr, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
		var fr fasthttp.Request
		if err != nil || fr.Read(bufio.NewReader(strings.NewReader(head))) != nil {
			return
		}
		want := route(nr.URL.Path)
		if i := r.match(nr.URL.Path); i >= 0 != (want != "") || i >= 0 && string(r.routes[i].Handler.(named)) != want {
			t.Fatalf("path %q: route %d of %q, want %q", nr.URL.Path, i, r.routes, want)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, nr)
		var ctx fasthttp.RequestCtx
		ctx.Init(&fr, nil, nil)
		r.ServeFastHTTP(&ctx)
		got, fast := w.Body.String(), string(ctx.Response.Body())
		if w.Code != 200 {
			got = "404"
		}
		if ctx.Response.StatusCode() != 200 {
			fast = "404"
		}
		if got != fast {
			t.Fatalf("target %q under %q: net/http serves %s, fasthttp %s", target, r.routes, got, fast)
		}
	})
}
