package asgi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/asgi"
	"github.com/m0serve/m0/internal/front"
	"github.com/m0serve/m0/internal/testutil"
	"github.com/m0serve/m0/internal/wire"
)

// scoped is what testdata/scope_check.py answers.
type scoped struct {
	Method      string      `json:"method"`
	Path        string      `json:"path"`
	RawPath     string      `json:"raw_path"`
	QueryString string      `json:"query_string"`
	RootPath    string      `json:"root_path"`
	HTTPVersion string      `json:"http_version"`
	Server      []any       `json:"server"`
	Headers     [][2]string `json:"headers"`
	Body        string      `json:"body"`
	Problems    []string    `json:"problems"`
}

// FuzzScope: a request of any method, target, headers and body, sent on a
// real connection to each front end, reaches the application (on the
// executor's loop, in a real interpreter) with a scope the ASGI
// specification allows: the types it names, lowercase header names, the
// body whole; the method, raw_path, query_string and body are the
// request's, path is raw_path decoded; and both front ends give the same
// scope (headers compared as a set: net/http keeps no order) for a
// request with an origin-form target both take.
func FuzzScope(f *testing.F) {
	f.Add("GET", "/", "", "")
	f.Add("POST", "/caf%C3%A9/x?a=1&b=%20", "X-Multi: a\r\nX-Multi: b\r\nContent-Type: text/plain\r\n", "hello")
	f.Add("GET", "/a%2Fb?q", "X_Forwarded_For: 6.6.6.6\r\nX-Forwarded-For: 1.2.3.4\r\n", "")
	f.Add("PUT", "/x", "Cookie: a=1\r\ncookie: b=2\r\nCoOkIe: c=3\r\n", "\x00\xff")
	f.Add("GET", "/%zz/%E2%9C%93/%ff", "", "")
	f.Add("OPTIONS", "*", "", "")
	f.Add("GET", "http://example.com/abs?x=1", "", "")
	f.Add("BREW", "/pot", "Accept: tea\r\nX-Empty:\r\nX-Tab: a\tb\r\nX-Latin: caf\xe9\r\n", "")
	f.Add("POST", "/chunked", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n")
	f.Add("get", "/x;p=1/./y/../z", "Content-Length: 0\r\n", "")
	dir, _ := filepath.Abs("testdata")
	app, err := m0.LoadApp("scope_check:app", &m0.LoadOptions{Dir: dir})
	if err != nil {
		f.Fatal(err)
	}
	// started is a handler of app with its lifespan, shut down after the
	// fuzzing.
	started := func(inline bool) *asgi.Handler {
		h := asgi.New(app, &asgi.Options{MaxBody: asgi.DefaultMaxBody, CloseTimeout: time.Second, Inline: inline})
		if err := h.Startup(context.Background()); err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			h.Shutdown(ctx)
		})
		return h
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { ln.Close() })
		return ln
	}
	h := started(false)
	ns := httptest.NewServer(h)
	f.Cleanup(ns.Close)
	ln := listen()
	fs := front.FastServer(h, front.Limits{})
	go fs.Serve(ln)
	f.Cleanup(func() { fs.Shutdown() })
	ih := started(true)
	iln := listen()
	go ih.ServeInline(iln, front.FastServer(ih, front.Limits{}).ServeConn, asgi.InlineOptions{Idle: time.Minute})
	servers := map[string]string{"net/http": strings.TrimPrefix(ns.URL, "http://"), "fasthttp": ln.Addr().String(),
		"inline": iln.Addr().String()}
	f.Fuzz(func(t *testing.T, method, target, headers, body string) {
		head := method + " " + target + " HTTP/1.1\r\nHost: example.com:8080\r\n" + headers
		if headers != "" && !strings.HasSuffix(headers, "\n") {
			head += "\r\n"
		}
		if body != "" && !strings.Contains(strings.ToLower(headers), "transfer-encoding") {
			head += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
		}
		req := head + "Connection: close\r\n\r\n" + body
		got := map[string]*scoped{}
		for _, fe := range frontends {
			resp, b, err := testutil.Send(servers[fe], req)
			if err != nil {
				t.Fatalf("%s: %s: %v", fe, testutil.Quote(req), err)
			}
			if resp == nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				continue // the front end or the bridge refused the request
			}
			var s scoped
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("%s: %s: %v in %q", fe, testutil.Quote(req), err, b)
			}
			if len(s.Problems) > 0 {
				t.Fatalf("%s: %s: the scope %+v: %q", fe, testutil.Quote(req), s, s.Problems)
			}
			// Blank lines before a request line are skipped (RFC 9112 2.2).
			if s.Method != strings.TrimLeft(method, "\r\n") || s.HTTPVersion != "1.1" || s.RootPath != "" {
				t.Fatalf("%s: %s: the scope %+v", fe, testutil.Quote(req), s)
			}
			if strings.HasPrefix(target, "/") {
				path, query, _ := strings.Cut(target, "?")
				decoded, _ := wire.Unescape(nil, []byte(path), true)
				if testutil.Latin1(s.RawPath) != path || testutil.Latin1(s.QueryString) != query ||
					utf8.Valid(decoded) && s.Path != string(decoded) {
					t.Fatalf("%s: target %q: path %q, raw_path %q, query_string %q", fe, target, s.Path, s.RawPath, s.QueryString)
				}
			}
			if testutil.PlainLines(headers) && !strings.Contains(strings.ToLower(headers), "content-length") &&
				!strings.Contains(strings.ToLower(headers), "transfer-encoding") && testutil.Latin1(s.Body) != body {
				t.Fatalf("%s: %s: body %s", fe, testutil.Quote(req), testutil.Quote(s.Body))
			}
			// net/http drops a chunked request's Trailer line and spells
			// its Transfer-Encoding "chunked" (see netScope); the server
			// ports differ, one listener each.
			s.Headers = slices.DeleteFunc(s.Headers, func(h [2]string) bool { return h[0] == "trailer" })
			for i, h := range s.Headers {
				if h[0] == "transfer-encoding" {
					s.Headers[i][1] = strings.ToLower(h[1])
				}
			}
			slices.SortFunc(s.Headers, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
			s.Server = nil
			got[fe] = &s
		}
		if len(got) < 2 || !strings.HasPrefix(target, "/") {
			// An absolute-form target's host is the Host header's under
			// fasthttp and the target's under net/http; such targets are
			// left to the head check.
			return
		}
		ref := got["fasthttp"]
		if ref == nil {
			return
		}
		for fe, s := range got {
			if a, b := fmt.Sprintf("%+v", *s), fmt.Sprintf("%+v", *ref); a != b {
				t.Fatalf("%s:\n%s: %s\nfasthttp: %s", testutil.Quote(req), fe, a, b)
			}
		}
	})
}
