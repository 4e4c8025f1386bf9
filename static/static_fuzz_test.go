package static_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/m0serve/m0/static"
)

// FuzzStaticPath: whatever the target, over a real connection to either
// front end, nothing outside the root, no dotfile and nothing through a
// symlink that leaves the root is ever sent; a file the handler serves
// itself is one of the root's visible files, whole; and both front ends
// serve the same file for a target both take.
func FuzzStaticPath(f *testing.F) {
	for _, s := range []string{
		"/static/hello.txt", "/static/../secret.txt", "/static/%2e%2e/secret.txt", "/static/..%2fsecret.txt",
		"/static/sub/%2e%2e/%2e%2e/secret.txt", "/static/link-out", "/static/dir-out/secret.txt", "/static/.env",
		"/static/%2egit/config", "/static/sub/.hidden", "/static/hello.txt%00.html", "/static/link-in",
		"/static/%252e%252e/secret.txt", "/static//etc/passwd", "/static/env.txt", "/static/g/config",
		"/static/sub/page.html", "/static/%2e%2e%2f", "/static/%5c..%5csecret.txt", "http://x/static/hello.txt",
		"/static/digits.txt?x=../../secret.txt", "/static", "/static/", "/static/dir", "/static/%68ello.txt",
	} {
		f.Add(s)
	}
	dir := tree(f)
	visible := map[string]bool{}
	for _, s := range []string{"hello, static\n", "body { color: red }\n", `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`,
		"# notes\n", "wOF2", "console.log(1)", "???", "0123456789", "<p>sub</p>", "a directory literally named %2e%2e", "<p>index</p>", "<p>inside</p>"} {
		visible[s] = true
	}
	h, err := static.New(dir, &static.Options{Prefix: "/static/", Next: app})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Shutdown(context.Background()) })
	srv := serveHandler(f, h)
	f.Fuzz(func(t *testing.T, target string) {
		served := map[string]string{}
		for _, fe := range []string{"net/http", "fasthttp"} {
			status, hdr, body, err := fetch(srv[fe].base, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			if err != nil {
				t.Fatalf("%s, GET %q: %v", fe, target, err)
			}
			for _, s := range []string{secret, "SECRET=1", "[core]", "HIDDEN-CONTENT", "root:"} {
				if strings.Contains(body, s) {
					t.Fatalf("%s, GET %q: sent what it must not: %d %q", fe, target, status, body)
				}
			}
			if status == 200 && hdr.Get("X-App") != "yes" {
				if !visible[body] {
					t.Fatalf("%s, GET %q: served %q itself", fe, target, body)
				}
				served[fe] = body
			} else if status == 400 {
				return // a target one front end refuses
			}
		}
		if served["net/http"] != served["fasthttp"] {
			t.Fatalf("GET %q: net/http serves %q, fasthttp %q", target, served["net/http"], served["fasthttp"])
		}
	})
}

// fetch sends a request as written and reads the response; an error is a
// response that could not be read.
func fetch(base, req string) (int, http.Header, string, error) {
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return 0, nil, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return 0, nil, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}
