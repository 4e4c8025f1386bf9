package wsgi_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/m0serve/m0/internal/testutil"
	"github.com/m0serve/m0/internal/wire"
)

// checked is what testdata/bridge.py's check_environ answers.
type checked struct {
	CGI      map[string]string `json:"cgi"`
	Body     string            `json:"body"`
	Problems []string          `json:"problems"`
}

// FuzzEnviron: a request of any method, target, headers and body, sent on
// a real connection to each front end, reaches the application (a real
// interpreter) with an environ PEP 3333 and wsgiref.validate accept: the
// required keys, str keys and native-string (latin-1) values, the body
// whole; REQUEST_METHOD, PATH_INFO (decoded, byte for byte), QUERY_STRING
// and the body are the request's; and both front ends build the same CGI
// variables for a request with an origin-form target both take.
func FuzzEnviron(f *testing.F) {
	f.Add("GET", "/", "", "")
	f.Add("POST", "/caf%C3%A9/x?a=1&b=%20", "X-Multi: a\r\nX-Multi: b\r\nContent-Type: text/plain\r\n", "hello")
	f.Add("GET", "/a%2Fb?q", "X_Forwarded_For: 6.6.6.6\r\nX-Forwarded-For: 1.2.3.4\r\n", "")
	f.Add("PUT", "/x", "Cookie: a=1\r\ncookie: b=2\r\nCoOkIe: c=3\r\n", "\x00\xff")
	f.Add("GET", "/", "CoOkIe: c=3\r\n", "")
	f.Add("GET", "/%zz", "", "")
	f.Add("OPTIONS", "*", "", "")
	f.Add("GET", "http://example.com/abs?x=1", "", "")
	f.Add("BREW", "/pot", "Accept: tea\r\nX-Empty:\r\nX-Tab: a\tb\r\nX-Latin: caf\xe9\r\n", "")
	f.Add("POST", "/chunked", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n")
	f.Add("GET", "/x;p=1/./y/../z", "Content-Length: 0\r\n", "")
	servers := map[string]string{}
	for _, fe := range frontends {
		servers[fe] = strings.TrimPrefix(serve(f, fe, "check_environ", nil).URL, "http://")
	}
	f.Fuzz(func(t *testing.T, method, target, headers, body string) {
		head := method + " " + target + " HTTP/1.1\r\nHost: example.com:8080\r\n" + headers
		if headers != "" && !strings.HasSuffix(headers, "\n") {
			head += "\r\n"
		}
		if body != "" && !strings.Contains(strings.ToLower(headers), "transfer-encoding") {
			head += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
		}
		req := head + "Connection: close\r\n\r\n" + body
		got := map[string]*checked{}
		for _, fe := range frontends {
			c, err := ask(servers[fe], req)
			if err != nil {
				t.Fatalf("%s: %s: %v", fe, testutil.Quote(req), err)
			}
			if c == nil {
				continue // the front end or the bridge refused the request
			}
			if len(c.Problems) > 0 {
				t.Fatalf("%s: %s: the environ %q: %q", fe, testutil.Quote(req), c.CGI, c.Problems)
			}
			env := c.CGI
			// Blank lines before a request line are skipped (RFC 9112 2.2).
			if env["REQUEST_METHOD"] != strings.TrimLeft(method, "\r\n") || env["SERVER_PROTOCOL"] != "HTTP/1.1" {
				t.Fatalf("%s: %s: the environ %q", fe, testutil.Quote(req), env)
			}
			// An absolute-form target names the host itself (RFC 9112
			// 3.2.2); an origin-form one is the request's path and query.
			if strings.HasPrefix(target, "/") {
				if env["HTTP_HOST"] != "example.com:8080" || env["SERVER_NAME"] != "example.com" || env["SERVER_PORT"] != "8080" {
					t.Fatalf("%s: %s: the environ %q", fe, testutil.Quote(req), env)
				}
				path, query, _ := strings.Cut(target, "?")
				if decoded, ok := wire.Unescape(nil, []byte(path), false); !ok || testutil.Latin1(env["PATH_INFO"]) != string(decoded) ||
					testutil.Latin1(env["QUERY_STRING"]) != query {
					t.Fatalf("%s: target %q: PATH_INFO %q, QUERY_STRING %q", fe, target, env["PATH_INFO"], env["QUERY_STRING"])
				}
			}
			if testutil.PlainLines(headers) && !strings.Contains(strings.ToLower(headers), "content-length") &&
				!strings.Contains(strings.ToLower(headers), "transfer-encoding") && testutil.Latin1(c.Body) != body {
				t.Fatalf("%s: %s: body %s", fe, testutil.Quote(req), testutil.Quote(c.Body))
			}
			delete(env, "REMOTE_PORT")
			got[fe] = c
		}
		if len(got) < 2 || !strings.HasPrefix(target, "/") {
			// An absolute-form target's host is the Host header's under
			// fasthttp and the target's under net/http (which RFC 9112
			// 3.2.2 asks for); such targets are left to the head check.
			return
		}
		n, fh := got["net/http"], got["fasthttp"]
		for k, v := range n.CGI {
			if fh.CGI[k] != v {
				t.Fatalf("%s: %s is %q under net/http, %q under fasthttp\nnet/http: %q\nfasthttp: %q", testutil.Quote(req), k, v, fh.CGI[k], n.CGI, fh.CGI)
			}
		}
		for k, v := range fh.CGI {
			if _, ok := n.CGI[k]; !ok {
				t.Fatalf("%s: %s is %q under fasthttp, missing under net/http\nnet/http: %q\nfasthttp: %q", testutil.Quote(req), k, v, n.CGI, fh.CGI)
			}
		}
		if n.Body != fh.Body {
			t.Fatalf("%s: body %s under net/http, %s under fasthttp", testutil.Quote(req), testutil.Quote(n.Body), testutil.Quote(fh.Body))
		}
	})
}

// ask sends req on a connection of its own and returns what
// check_environ answered, or nil when something else answered.
func ask(addr, req string) (*checked, error) {
	resp, b, err := testutil.Send(addr, req)
	if err != nil || resp == nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		return nil, err
	}
	var out checked
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
