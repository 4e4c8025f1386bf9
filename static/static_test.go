package static_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/m0serve/m0/static"
	"github.com/valyala/fasthttp"
)

const secret = "TOPSECRET-outside-the-root"

// app is the handler behind: it says it answered.
var app = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-App", "yes")
	fmt.Fprintf(w, "app:%s", r.URL.Path)
})

// tree makes the served directory, a secret beside it, and returns the
// directory.
func tree(t testing.TB) string {
	t.Helper()
	base := t.TempDir()
	os.WriteFile(filepath.Join(base, "secret.txt"), []byte(secret), 0o644)
	dir := filepath.Join(base, "public")
	files := map[string]string{
		"hello.txt":       "hello, static\n",
		"style.css":       "body { color: red }\n",
		"style.css.br":    "BROTLI-BYTES",
		"style.css.gz":    "GZIP-BYTES",
		"img.svg":         `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`,
		"notes.md":        "# notes\n",
		"font.woff2":      "wOF2",
		"app.js":          "console.log(1)",
		"blob.xyz":        "???",
		"digits.txt":      "0123456789",
		".env":            "SECRET=1",
		".git/config":     "[core]",
		"sub/page.html":   "<p>sub</p>",
		"sub/.hidden":     "HIDDEN-CONTENT",
		"%2e%2e/x.txt":    "a directory literally named %2e%2e",
		"index.html":      "<p>index</p>",
		"dir/inside.html": "<p>inside</p>",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("hello.txt", filepath.Join(dir, "link-in"))
	os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(dir, "link-out"))
	os.Symlink("../secret.txt", filepath.Join(dir, "link-up"))
	os.Symlink(base, filepath.Join(dir, "dir-out"))
	os.Symlink(".env", filepath.Join(dir, "env.txt"))
	os.Symlink(".git", filepath.Join(dir, "g"))
	return dir
}

type server struct{ base string }

// serve starts dir's handler under /static/ on both front ends.
func serve(t testing.TB, dir string, opts static.Options) map[string]server {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = "/static/"
	}
	h, err := static.New(dir, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	return serveHandler(t, h)
}

// serveHandler serves h on both front ends.
func serveHandler(t testing.TB, h *static.Handler) map[string]server {
	t.Helper()
	ns := httptest.NewServer(h)
	t.Cleanup(ns.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := &fasthttp.Server{Handler: h.ServeFastHTTP, NoDefaultServerHeader: true, NoDefaultContentType: true,
		DisablePreParseMultipartForm: true}
	go fs.Serve(ln)
	t.Cleanup(func() { fs.Shutdown() })
	return map[string]server{"net/http": {ns.URL}, "fasthttp": {"http://" + ln.Addr().String()}}
}

func each(t *testing.T, srv map[string]server, fn func(t *testing.T, s server)) {
	for _, fe := range []string{"net/http", "fasthttp"} {
		t.Run(fe, func(t *testing.T) { fn(t, srv[fe]) })
	}
}

// raw sends one request with target exactly as given.
func (s server) raw(t *testing.T, method, target string, headers ...string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", method, target)
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
	}
	b.WriteString("\r\n")
	io.WriteString(c, b.String())
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func TestGet(t *testing.T) {
	dir := tree(t)
	srv := serve(t, dir, static.Options{Next: app, CacheControl: "public, max-age=60",
		Headers: []static.Header{{"X-Frame-Options", "DENY"}, {"Strict-Transport-Security", "max-age=1"}}})
	each(t, srv, func(t *testing.T, s server) {
		resp, body := s.raw(t, "GET", "/static/hello.txt")
		if resp.StatusCode != 200 || body != "hello, static\n" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		want := map[string]string{
			"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff",
			"Cache-Control": "public, max-age=60", "Accept-Ranges": "bytes", "Content-Length": "14",
			"X-Frame-Options": "DENY", "Strict-Transport-Security": "max-age=1",
		}
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: %q, want %q", k, got, v)
			}
		}
		fi, _ := os.Stat(filepath.Join(dir, "hello.txt"))
		if lm := resp.Header.Get("Last-Modified"); lm != fi.ModTime().UTC().Format(http.TimeFormat) {
			t.Errorf("Last-Modified %q", lm)
		}
		if et := resp.Header.Get("ETag"); !strings.HasPrefix(et, `"`) || !strings.HasSuffix(et, `"`) {
			t.Errorf("ETag %q", et)
		}
		if resp.Header.Get("X-App") != "" || resp.Header.Get("Vary") != "" {
			t.Errorf("headers %v", resp.Header)
		}
		// HEAD: the same head, no body.
		head, body := s.raw(t, "HEAD", "/static/hello.txt")
		if head.StatusCode != 200 || body != "" || head.Header.Get("Content-Length") != "14" ||
			head.Header.Get("ETag") != resp.Header.Get("ETag") {
			t.Errorf("HEAD: %d %q %v", head.StatusCode, body, head.Header)
		}
		// A symlink inside the root to a file inside it is followed.
		if r, body := s.raw(t, "GET", "/static/link-in"); r.StatusCode != 200 || body != "hello, static\n" {
			t.Errorf("link-in: %d %q", r.StatusCode, body)
		}
		if r, body := s.raw(t, "GET", "/static/sub/page.html"); r.StatusCode != 200 || body != "<p>sub</p>" {
			t.Errorf("sub/page.html: %d %q", r.StatusCode, body)
		}
		if r, body := s.raw(t, "GET", "/static/hello.txt?x=%00"); r.StatusCode != 200 || body != "hello, static\n" {
			t.Errorf("a NUL in the query is the application's business: %d %q", r.StatusCode, body)
		}
	})
}

func TestContentTypes(t *testing.T) {
	srv := serve(t, tree(t), static.Options{Next: app})
	cases := map[string]string{
		"/static/notes.md": "text/markdown; charset=utf-8", "/static/img.svg": "image/svg+xml",
		"/static/font.woff2": "font/woff2", "/static/app.js": "text/javascript; charset=utf-8",
		"/static/blob.xyz": "application/octet-stream", "/static/sub/page.html": "text/html; charset=utf-8",
		"/static/style.css": "text/css; charset=utf-8",
	}
	each(t, srv, func(t *testing.T, s server) {
		for path, ct := range cases {
			r, _ := s.raw(t, "GET", path)
			if r.StatusCode != 200 || r.Header.Get("Content-Type") != ct || r.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: %d %q", path, r.StatusCode, r.Header.Get("Content-Type"))
			}
			csp := r.Header.Get("Content-Security-Policy")
			if (path == "/static/img.svg") != (csp == static.SVGPolicy) {
				t.Errorf("%s: Content-Security-Policy %q", path, csp)
			}
		}
	})
}

func TestPolicyHeaderReplacesSVGs(t *testing.T) {
	srv := serve(t, tree(t), static.Options{Headers: []static.Header{{"Content-Security-Policy", "default-src 'self'"}}})
	each(t, srv, func(t *testing.T, s server) {
		for _, p := range []string{"/static/img.svg", "/static/hello.txt", "/static/missing"} {
			r, _ := s.raw(t, "GET", p)
			if got := r.Header.Values("Content-Security-Policy"); len(got) != 1 || got[0] != "default-src 'self'" {
				t.Errorf("%s: %q", p, got)
			}
		}
	})
}

func TestConditional(t *testing.T) {
	srv := serve(t, tree(t), static.Options{Next: app, CacheControl: "max-age=5"})
	each(t, srv, func(t *testing.T, s server) {
		first, _ := s.raw(t, "GET", "/static/hello.txt")
		etag, lm := first.Header.Get("ETag"), first.Header.Get("Last-Modified")
		mod, _ := http.ParseTime(lm)
		cases := []struct {
			headers []string
			status  int
		}{
			{[]string{"If-None-Match", etag}, 304},
			{[]string{"If-None-Match", "W/" + etag}, 304},
			{[]string{"If-None-Match", `"other", ` + etag}, 304},
			{[]string{"If-None-Match", "*"}, 304},
			{[]string{"If-None-Match", `"other"`}, 200},
			{[]string{"If-Modified-Since", lm}, 304},
			{[]string{"If-Modified-Since", mod.Add(time.Hour).Format(http.TimeFormat)}, 304},
			{[]string{"If-Modified-Since", mod.Add(-time.Hour).Format(http.TimeFormat)}, 200},
			{[]string{"If-Modified-Since", "yesterday"}, 200},
			// If-None-Match wins over If-Modified-Since.
			{[]string{"If-None-Match", `"other"`, "If-Modified-Since", lm}, 200},
		}
		for _, c := range cases {
			r, body := s.raw(t, "GET", "/static/hello.txt", c.headers...)
			if r.StatusCode != c.status {
				t.Errorf("%v: %d, want %d", c.headers, r.StatusCode, c.status)
			}
			if c.status == 304 && (body != "" || r.Header.Get("ETag") != etag || r.Header.Get("Cache-Control") != "max-age=5" ||
				r.Header.Get("Content-Type") != "") {
				t.Errorf("%v: 304 with body %q and headers %v", c.headers, body, r.Header)
			}
		}
	})
}

func TestRanges(t *testing.T) {
	srv := serve(t, tree(t), static.Options{Next: app})
	each(t, srv, func(t *testing.T, s server) {
		first, _ := s.raw(t, "GET", "/static/digits.txt")
		etag, lm := first.Header.Get("ETag"), first.Header.Get("Last-Modified")
		cases := []struct {
			headers []string
			status  int
			body    string
			crange  string
		}{
			{[]string{"Range", "bytes=0-4"}, 206, "01234", "bytes 0-4/10"},
			{[]string{"Range", "bytes=7-"}, 206, "789", "bytes 7-9/10"},
			{[]string{"Range", "bytes=-3"}, 206, "789", "bytes 7-9/10"},
			{[]string{"Range", "bytes=5-100"}, 206, "56789", "bytes 5-9/10"},
			{[]string{"Range", "bytes=10-"}, 416, "", "bytes */10"},
			{[]string{"Range", "bytes=-0"}, 416, "", "bytes */10"},
			{[]string{"Range", "bytes=x-y"}, 200, "0123456789", ""},
			{[]string{"Range", "items=0-1"}, 200, "0123456789", ""},
			{[]string{"Range", "bytes=5-2"}, 200, "0123456789", ""},
			{[]string{"Range", "bytes=0-1", "If-Range", etag}, 206, "01", "bytes 0-1/10"},
			{[]string{"Range", "bytes=0-1", "If-Range", `"stale"`}, 200, "0123456789", ""},
			{[]string{"Range", "bytes=0-1", "If-Range", "W/" + etag}, 200, "0123456789", ""},
			{[]string{"Range", "bytes=0-1", "If-Range", lm}, 206, "01", "bytes 0-1/10"},
			{[]string{"Range", "bytes=0-1", "If-Range", "Mon, 02 Jan 2006 15:04:05 GMT"}, 200, "0123456789", ""},
			{[]string{"Range", "bytes="}, 200, "0123456789", ""},
			{[]string{"Range", "bytes=0-,0-,0-"}, 200, "0123456789", ""}, // more than the file: once
		}
		for _, c := range cases {
			r, body := s.raw(t, "GET", "/static/digits.txt", c.headers...)
			if c.status == 416 && r.Header.Get("Content-Length") != "0" {
				t.Errorf("%v: a 416 needs Content-Length: 0 (keep-alive clients wait for a body), got %q", c.headers, r.Header.Get("Content-Length"))
			}
			if r.StatusCode != c.status || body != c.body || r.Header.Get("Content-Range") != c.crange {
				t.Errorf("%v: %d %q %q, want %d %q %q", c.headers, r.StatusCode, body, r.Header.Get("Content-Range"),
					c.status, c.body, c.crange)
			}
		}
		// Several ranges: multipart/byteranges.
		r, body := s.raw(t, "GET", "/static/digits.txt", "Range", "bytes=0-1, 4-5,-2")
		mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if r.StatusCode != 206 || mt != "multipart/byteranges" {
			t.Fatalf("%d %q", r.StatusCode, r.Header.Get("Content-Type"))
		}
		mr := multipart.NewReader(strings.NewReader(body), params["boundary"])
		var got []string
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(p)
			got = append(got, p.Header.Get("Content-Range")+"="+string(b))
		}
		want := []string{"bytes 0-1/10=01", "bytes 4-5/10=45", "bytes 8-9/10=89"}
		if strings.Join(got, ";") != strings.Join(want, ";") {
			t.Errorf("parts %q, want %q", got, want)
		}
		if r.Header.Get("Content-Length") != fmt.Sprint(len(body)) {
			t.Errorf("Content-Length %q for %d bytes", r.Header.Get("Content-Length"), len(body))
		}
	})
}

func TestPrecompressed(t *testing.T) {
	srv := serve(t, tree(t), static.Options{Next: app})
	each(t, srv, func(t *testing.T, s server) {
		cases := []struct{ accept, body, encoding string }{
			{"br, gzip", "BROTLI-BYTES", "br"},
			{"gzip, deflate", "GZIP-BYTES", "gzip"},
			{"gzip;q=1, br;q=0", "GZIP-BYTES", "gzip"},
			{"", "body { color: red }\n", ""},
			{"identity", "body { color: red }\n", ""},
			{"br;q=0, gzip;q=0", "body { color: red }\n", ""},
		}
		// Several ranges of a compressed file: the whole file, once.
		if r, body := s.raw(t, "GET", "/static/style.css", "Accept-Encoding", "gzip", "Range", "bytes=0-1,3-4"); r.StatusCode != 200 || body != "GZIP-BYTES" {
			t.Errorf("multiple ranges of a gzip sibling: %d %q", r.StatusCode, body)
		}
		etags := map[string]bool{}
		for _, c := range cases {
			r, body := s.raw(t, "GET", "/static/style.css", "Accept-Encoding", c.accept)
			// Vary where a sibling was looked for: a client that takes no
			// encoding gets the plain file, as any client may.
			vary := ""
			if c.accept != "" && c.accept != "identity" && c.accept != "br;q=0, gzip;q=0" {
				vary = "Accept-Encoding"
			}
			if r.StatusCode != 200 || body != c.body || r.Header.Get("Content-Encoding") != c.encoding ||
				r.Header.Get("Vary") != vary || r.Header.Get("Content-Type") != "text/css; charset=utf-8" {
				t.Errorf("Accept-Encoding %q: %d %q %q %v", c.accept, r.StatusCode, body, r.Header.Get("Content-Encoding"), r.Header)
			}
			etags[c.encoding+r.Header.Get("ETag")] = true
		}
		if len(etags) != 3 {
			t.Errorf("each encoding needs its own ETag: %v", etags)
		}
	})
}

func TestFallThrough(t *testing.T) {
	srv := serve(t, tree(t), static.Options{Next: app, Headers: []static.Header{{"X-Static", "1"}}})
	each(t, srv, func(t *testing.T, s server) {
		for _, c := range []struct{ method, path string }{
			{"GET", "/static/missing.txt"}, {"GET", "/static/sub/"}, {"GET", "/static/sub"},
			{"GET", "/elsewhere"}, {"POST", "/static/hello.txt"}, {"GET", "/static/"}, {"GET", "/static"},
			{"GET", "/static/.well-known/acme"},
		} {
			r, body := s.raw(t, c.method, c.path)
			if r.Header.Get("X-App") != "yes" || !strings.HasPrefix(body, "app:") || r.Header.Get("X-Static") != "" {
				t.Errorf("%s %s: %d %q %v", c.method, c.path, r.StatusCode, body, r.Header)
			}
		}
	})
	// With nothing behind it, a miss is a 404 that carries the headers.
	alone := serve(t, tree(t), static.Options{Headers: []static.Header{{"X-Static", "1"}}})
	each(t, alone, func(t *testing.T, s server) {
		r, body := s.raw(t, "GET", "/static/missing.txt")
		if r.StatusCode != 404 || r.Header.Get("X-Static") != "1" || r.Header.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.HasPrefix(body, "Not Found") {
			t.Errorf("%d %q %v", r.StatusCode, body, r.Header)
		}
	})
}

// TestTraversal: hostile paths never reach what is outside the root, nor
// dotfiles: each is answered by the application (or refused), never with
// the file.
func TestTraversal(t *testing.T) {
	srv := serve(t, tree(t), static.Options{Next: app})
	hostile := []string{
		"/static/../secret.txt", "/static/%2e%2e/secret.txt", "/static/%2E%2E/secret.txt",
		"/static/..%2fsecret.txt", "/static/%2e%2e%2fsecret.txt", "/static/..%2Fsecret.txt",
		"/static/....//secret.txt", "/static/..\\secret.txt", "/static/%5c..%5csecret.txt",
		"/static/..%5csecret.txt", "/static/sub/../../secret.txt", "/static/sub/%2e%2e/%2e%2e/secret.txt",
		"/static/.%2e/secret.txt", "/static/%2e./secret.txt", "/static/..", "/static/%2e%2e",
		"/static/link-out", "/static/link-up", "/static/dir-out/secret.txt", "/static/dir-out/public/hello.txt",
		"/static//etc/passwd", "/static/%2fetc%2fpasswd", "/static/%2F..%2Fsecret.txt",
		"/static/.env", "/static/%2eenv", "/static/.git/config", "/static/%2egit/config",
		"/static/sub/.hidden", "/static/hello.txt%00.html", "/static/%00", "/static/..%00/secret.txt",
		"/static/..;/secret.txt", "/static/%252e%252e/secret.txt", "/static/%c0%ae%c0%ae/secret.txt",
		"/static/..%c0%afsecret.txt", "/static/./hello.txt", "/static/sub/./page.html",
		"/static/sub//page.html", "/static/%2e/hello.txt", "/../secret.txt",
		"/static/env.txt", "/static/g/config",
	}
	if len(hostile) < 30 {
		t.Fatal("the table is short")
	}
	each(t, srv, func(t *testing.T, s server) {
		for _, p := range hostile {
			r, body := s.raw(t, "GET", p)
			if strings.Contains(body, secret) || strings.Contains(body, "SECRET=1") || strings.Contains(body, "[core]") ||
				strings.Contains(body, "HIDDEN-CONTENT") || strings.Contains(body, "root:") {
				t.Errorf("%s served what it must not: %d %q", p, r.StatusCode, body)
			}
			if r.StatusCode == 200 && r.Header.Get("X-App") != "yes" {
				t.Errorf("%s served a file itself: %q", p, body)
			}
		}
	})
}

func TestPrefixRoot(t *testing.T) {
	srv := serve(t, tree(t), static.Options{Prefix: "/", Next: app})
	each(t, srv, func(t *testing.T, s server) {
		if r, body := s.raw(t, "GET", "/hello.txt"); r.StatusCode != 200 || body != "hello, static\n" {
			t.Errorf("%d %q", r.StatusCode, body)
		}
		if r, _ := s.raw(t, "GET", "/api/x"); r.Header.Get("X-App") != "yes" {
			t.Errorf("a miss under / did not reach the app")
		}
	})
}

// TestShutdown: after Shutdown a file is answered 503 (the directory is let
// go of), what is not a file's still goes to the handler behind, and a
// second Shutdown says so as every m0 handler's does.
func TestShutdown(t *testing.T) {
	h, err := static.New(tree(t), &static.Options{Prefix: "/static/", Next: app})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHandler(t, h)
	each(t, srv, func(t *testing.T, s server) {
		if r, body := s.raw(t, "GET", "/static/hello.txt"); r.StatusCode != 200 || body != "hello, static\n" {
			t.Fatalf("before Shutdown: %d %q", r.StatusCode, body)
		}
	})
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	each(t, srv, func(t *testing.T, s server) {
		r, body := s.raw(t, "GET", "/static/hello.txt")
		if r.StatusCode != 503 || body != "Service Unavailable\n" || !r.Close {
			t.Errorf("a file after Shutdown: %d %q (close %v)", r.StatusCode, body, r.Close)
		}
		if r, body := s.raw(t, "GET", "/elsewhere"); r.StatusCode != 200 || body != "app:/elsewhere" {
			t.Errorf("the handler behind after Shutdown: %d %q", r.StatusCode, body)
		}
	})
	if err := h.Shutdown(context.Background()); err != static.ErrClosed || !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("a second Shutdown: %v", err)
	}
}
