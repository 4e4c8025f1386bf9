package wsgi_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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
				t.Fatalf("%s: %s: %v", fe, short(req), err)
			}
			if c == nil {
				continue // the front end or the bridge refused the request
			}
			if len(c.Problems) > 0 {
				t.Fatalf("%s: %s: the environ %q: %q", fe, short(req), c.CGI, c.Problems)
			}
			env := c.CGI
			// Blank lines before a request line are skipped (RFC 9112 2.2).
			if env["REQUEST_METHOD"] != strings.TrimLeft(method, "\r\n") || env["SERVER_PROTOCOL"] != "HTTP/1.1" {
				t.Fatalf("%s: %s: the environ %q", fe, short(req), env)
			}
			// An absolute-form target names the host itself (RFC 9112
			// 3.2.2); an origin-form one is the request's path and query.
			if strings.HasPrefix(target, "/") {
				if env["HTTP_HOST"] != "example.com:8080" || env["SERVER_NAME"] != "example.com" || env["SERVER_PORT"] != "8080" {
					t.Fatalf("%s: %s: the environ %q", fe, short(req), env)
				}
				path, query, _ := strings.Cut(target, "?")
				if decoded, ok := unescape(path); !ok || latin1(env["PATH_INFO"]) != decoded || latin1(env["QUERY_STRING"]) != query {
					t.Fatalf("%s: target %q: PATH_INFO %q, QUERY_STRING %q", fe, target, env["PATH_INFO"], env["QUERY_STRING"])
				}
			}
			if plainLines(headers) && !strings.Contains(strings.ToLower(headers), "content-length") &&
				!strings.Contains(strings.ToLower(headers), "transfer-encoding") && latin1(c.Body) != body {
				t.Fatalf("%s: %s: body %s", fe, short(req), short(c.Body))
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
				t.Fatalf("%s: %s is %q under net/http, %q under fasthttp\nnet/http: %q\nfasthttp: %q", short(req), k, v, fh.CGI[k], n.CGI, fh.CGI)
			}
		}
		for k, v := range fh.CGI {
			if _, ok := n.CGI[k]; !ok {
				t.Fatalf("%s: %s is %q under fasthttp, missing under net/http\nnet/http: %q\nfasthttp: %q", short(req), k, v, n.CGI, fh.CGI)
			}
		}
		if n.Body != fh.Body {
			t.Fatalf("%s: body %s under net/http, %s under fasthttp", short(req), short(n.Body), short(fh.Body))
		}
	})
}

// plainLines reports whether headers is header lines each ended by CRLF,
// none empty (the head goes on after them, to the Content-Length added).
func plainLines(headers string) bool {
	for line := range strings.SplitSeq(strings.TrimSuffix(headers, "\r\n"), "\r\n") {
		if headers != "" && (line == "" || strings.ContainsAny(line, "\r\n")) {
			return false
		}
	}
	return headers == "" || strings.HasSuffix(headers, "\r\n")
}

// ask sends req on a connection of its own and returns what
// check_environ answered, or nil when something else answered.
func ask(addr, req string) (*checked, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	go func() {
		// The server may answer before it has read it all; after it, the
		// client sends nothing more (a body cut short ends there).
		io.WriteString(c, req)
		c.(*net.TCPConn).CloseWrite()
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, err
	}
	if err != nil {
		return nil, nil // no response: the connection closed on a head it refused
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if errors.Is(err, os.ErrDeadlineExceeded) || err != nil && resp.StatusCode == 200 {
		return nil, err
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		return nil, nil
	}
	var out checked
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// short quotes s, cut to a length a failure can print.
func short(s string) string {
	if len(s) > 400 {
		return strconv.Quote(s[:400]) + "..."
	}
	return strconv.Quote(s)
}

// latin1 is the bytes a native string carries (PEP 3333: each code point
// below 256 one byte).
func latin1(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff || r == utf8.RuneError {
			return "\x00not latin-1\x00"
		}
		b = append(b, byte(r))
	}
	return string(b)
}

// unescape percent-decodes a path; false for a malformed escape.
func unescape(s string) (string, bool) {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil || s[i+1] == '+' || s[i+1] == '-' {
			return "", false
		}
		b = append(b, byte(n))
		i += 2
	}
	return string(b), true
}
