package mount

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// named answers its name, on both front ends.
type named string

func (n named) ServeHTTP(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, string(n)) }
func (n named) ServeFastHTTP(ctx *fasthttp.RequestCtx)           { ctx.WriteString(string(n)) }

// TestRouting: a table of paths against prefixes; the longest prefix that
// claims a path serves it, and what none claims is a 404.
func TestRouting(t *testing.T) {
	mounts := []Route{{"/api", named("api")}, {"/api/v2/", named("v2")}, {"/flask", named("flask")}, {"/static/files", named("files")}}
	withRoot := append([]Route{{"/", named("root")}}, mounts...)
	cases := []struct {
		path           string
		want, wantRoot string // "" is a 404
	}{
		{"/api", "api", "api"},
		{"/api/", "api", "api"},
		{"/api/users", "api", "api"},
		{"/api/v2", "v2", "v2"},
		{"/api/v2/x", "v2", "v2"},
		{"/api/v20", "api", "api"},
		{"/apix", "", "root"},
		{"/flask/a/b?q=1", "flask", "flask"},
		{"/static", "", "root"},
		{"/static/files/x.css", "files", "files"},
		{"/", "", "root"},
		{"/other", "", "root"},
	}
	for _, routes := range [][]Route{mounts, withRoot} {
		r, err := New(routes)
		if err != nil {
			t.Fatal(err)
		}
		ns := httptest.NewServer(r)
		defer ns.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		fs := &fasthttp.Server{Handler: r.ServeFastHTTP}
		go fs.Serve(ln)
		defer fs.Shutdown()
		for _, base := range []string{ns.URL, "http://" + ln.Addr().String()} {
			for _, c := range cases {
				want := c.want
				if len(routes) == len(withRoot) {
					want = c.wantRoot
				}
				resp, err := http.Get(base + c.path)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want == "" && resp.StatusCode != 404 || want != "" && (resp.StatusCode != 200 || string(b) != want) {
					t.Errorf("%s%s: %d %q, want %q", base, c.path, resp.StatusCode, b, want)
				}
			}
		}
	}
}

func TestRefusals(t *testing.T) {
	for _, routes := range [][]Route{
		{{"api", named("a")}},
		{{"/a", named("a")}, {"/a/", named("b")}},
		{{"/", named("a")}, {"/", named("b")}},
	} {
		if _, err := New(routes); err == nil {
			t.Errorf("New(%v) took it", routes)
		}
	}
	_, err := New([]Route{{"/a", named("a")}, {"/a/", named("b")}})
	if err == nil || !strings.Contains(err.Error(), "two mounts at /a") {
		t.Errorf("error %v", err)
	}
	r, _ := New([]Route{{"/a", http.NotFoundHandler()}})
	if r.Fast() {
		t.Error("a net/http handler alone, and the router says it serves fasthttp")
	}
}
