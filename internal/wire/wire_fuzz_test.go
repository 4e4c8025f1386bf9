package wire

import (
	"bufio"
	"bytes"
	"cmp"
	"io"
	"net/http"
	"net/textproto"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// FuzzPacked: a packed header list of any bytes is read within its bounds;
// the pairs read pack back to the bytes they came from; Forward, AppLength
// and NetHeader agree with them on what is forwarded and what length the
// application named.
func FuzzPacked(f *testing.F) {
	f.Add(pack([2]string{"Content-Type", "text/plain"}, [2]string{"content-length", "12"}, [2]string{"Transfer-Encoding", "chunked"}), int64(-1))
	f.Add(pack([2]string{"Set-Cookie", "a=1"}, [2]string{"set-cookie", "b=2"}, [2]string{"Content-Length", "x"}), int64(5))
	f.Add(pack([2]string{"Date", "Mon, 02 Jan 2006 15:04:05 GMT"}, [2]string{"Keep-Alive", "1"}, [2]string{"Trailer", "X"}), int64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 'x'}, int64(-1))
	f.Add([]byte{1, 0, 0, 0, 'a', 9, 0, 0, 0, 'b'}, int64(-1))
	f.Fuzz(func(t *testing.T, head []byte, length int64) {
		var pairs [][2]string
		tokens := true
		EachPacked(head, func(name, value []byte) {
			pairs = append(pairs, [2]string{string(name), string(value)})
			tokens = tokens && validName(name)
		})
		again := pack(pairs...)
		if !bytes.HasPrefix(head, again) {
			t.Fatalf("EachPacked(%q) read %q, which packs to %q", head, pairs, again)
		}
		if !tokens {
			// The bridges' C side packs token names only (put_header and
			// the ASGI start message refuse others), which EqualFold
			// relies on.
			return
		}
		wantLength := int64(-1)
		var forwarded [][2]string
		for _, p := range pairs {
			switch strings.ToLower(p[0]) {
			case "content-length":
				wantLength = ParseLength([]byte(p[1]))
			case "transfer-encoding", "keep-alive", "trailer":
			default:
				forwarded = append(forwarded, p)
			}
		}
		var got [][2]string
		n := Forward(head, func(name, value []byte) { got = append(got, [2]string{string(name), string(value)}) })
		if n != wantLength || !reflect.DeepEqual(got, forwarded) {
			t.Fatalf("Forward(%q) = %d, %q; want %d, %q", head, n, got, wantLength, forwarded)
		}
		if n := AppLength(head); n != wantLength {
			t.Fatalf("AppLength(%q) = %d, want %d", head, n, wantLength)
		}
		hdr := http.Header{}
		NetHeader(hdr, head, length)
		want := http.Header{}
		for _, p := range forwarded {
			k := textproto.CanonicalMIMEHeaderKey(p[0])
			want[k] = append(want[k], p[1])
		}
		if _, ok := want["Content-Type"]; !ok {
			want["Content-Type"] = nil
		}
		if _, ok := want["Date"]; !ok {
			want["Date"] = hdr["Date"]
			if _, err := http.ParseTime(hdr.Get("Date")); err != nil || len(hdr["Date"]) != 1 {
				t.Fatalf("NetHeader(%q): Date %q", head, hdr["Date"])
			}
		}
		if length >= 0 {
			want["Content-Length"] = []string{strconv.FormatInt(length, 10)}
		}
		if !reflect.DeepEqual(hdr, want) {
			t.Fatalf("NetHeader(%q, %d) = %q, want %q", head, length, hdr, want)
		}
	})
}

// FuzzWriteHead: the head a bridge writes on the connection itself is
// one HTTP response, which net/http reads back with the status, the
// headers, the length and Connection: close it was written with.
func FuzzWriteHead(f *testing.F) {
	f.Add(true, 200, pack([2]string{"Content-Type", "text/plain"}, [2]string{"Connection", "keep-alive"}), int64(5))
	f.Add(false, 404, pack([2]string{"Date", "Mon, 02 Jan 2006 15:04:05 GMT"}), int64(-1))
	f.Add(true, 599, pack([2]string{"X-A", ""}, [2]string{"x-a", "b"}), int64(0))
	f.Fuzz(func(t *testing.T, http11 bool, status int, head []byte, length int64) {
		if status < 100 || status > 999 || status/100 == 1 {
			return // the bridges send a final status
		}
		valid := true
		EachPacked(head, func(name, value []byte) {
			valid = valid && validName(name) && validValue(value) && !EqualFold(name, "Content-Length") &&
				!EqualFold(name, "Transfer-Encoding") && !EqualFold(name, "Trailer")
		})
		if !valid {
			return // the bridges refuse such names and values (cpython's checks), or drop them (Forward)
		}
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		WriteHead(w, http11, status, func(fn func(name, value []byte)) { EachPacked(head, fn) }, length)
		w.Flush()
		out := b.String()
		resp, err := http.ReadResponse(bufio.NewReader(&b), nil)
		if err != nil {
			t.Fatalf("WriteHead wrote %q: %v", out, err)
		}
		if resp.StatusCode != status || resp.ProtoAtLeast(1, 1) != http11 || !resp.Close {
			t.Fatalf("WriteHead wrote %q: status %d, %s, close %v", out, resp.StatusCode, resp.Proto, resp.Close)
		}
		// A 204 carries no Content-Length (RFC 9110 8.6); another status the
		// one it is given.
		wantLength := ""
		if length >= 0 && status != http.StatusNoContent {
			wantLength = strconv.FormatInt(length, 10)
		}
		if got := resp.Header.Values("Content-Length"); strings.Join(got, ",") != wantLength {
			t.Fatalf("WriteHead wrote %q: Content-Length %q, want %q", out, got, wantLength)
		}
		if rest, _ := io.ReadAll(resp.Body); length >= 0 && len(rest) != 0 {
			t.Fatalf("WriteHead wrote %q: a body %q", out, rest)
		}
		EachPacked(head, func(name, value []byte) {
			if EqualFold(name, "Connection") {
				return
			}
			k := textproto.CanonicalMIMEHeaderKey(string(name))
			v := strings.Trim(string(value), " \t")
			for _, got := range resp.Header[k] {
				if got == v {
					return
				}
			}
			t.Fatalf("WriteHead wrote %q: %s: %q is not among %q", out, name, v, resp.Header[k])
		})
		if len(resp.Header["Date"]) == 0 {
			t.Fatalf("WriteHead wrote %q: no Date", out)
		}
	})
}

func validName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

func validValue(b []byte) bool {
	for _, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// FuzzUnderPrefix: a path lies under a mount prefix exactly when it is the
// prefix or the prefix and a slash and more, and the prefix and the rest
// make the path again (SCRIPT_NAME + PATH_INFO, root_path + the rest).
func FuzzUnderPrefix(f *testing.F) {
	for _, c := range [][2]string{{"/a/b", "/a"}, {"/a", "/a"}, {"/ab", "/a"}, {"/x", ""}, {"", ""}, {"/a//b", "/a/"}, {"a", ""}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, path, prefix string) {
		rest, ok := UnderPrefix(path, prefix)
		want := path == prefix || strings.HasPrefix(path, prefix+"/") || prefix == "" && strings.HasPrefix(path, "/")
		if prefix == "" && path == "" {
			want = true
		}
		if ok != want {
			t.Fatalf("UnderPrefix(%q, %q) = %q, %v; want %v", path, prefix, rest, ok, want)
		}
		if !ok {
			if rest != "" {
				t.Fatalf("UnderPrefix(%q, %q) refused with %q", path, prefix, rest)
			}
			return
		}
		if prefix+rest != path || rest != "" && rest[0] != '/' {
			t.Fatalf("UnderPrefix(%q, %q) = %q", path, prefix, rest)
		}
	})
}

// FuzzTarget: the path and query the bridges take from a target fasthttp
// parsed are the target's own bytes, as sent: an origin-form target cut at
// its first "?", whose path decodes to what net/http decodes it to. An
// absolute-form target's path is only checked to decode as net/http's
// when neither is empty and it holds no "#" (which no request-target may
// hold, and the two parsers read differently).
func FuzzTarget(f *testing.F) {
	for _, s := range []string{"/", "/a/b?c=d", "/caf%C3%A9?x", "/a?b?c", "/%zz", "http://example.com/a%2Fb?q=1", "*", "//x/y", "/a/../b", "/a/./b//c", "http://x", "/?", "/#frag"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		head := "GET " + target + " HTTP/1.1\r\nHost: example.com\r\n\r\n"
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(strings.NewReader(head))); err != nil {
			return
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, nil, nil)
		path, query := Target(&ctx)
		if strings.HasPrefix(target, "/") {
			p, q, _ := strings.Cut(target, "?")
			if string(path) != p || string(query) != q {
				t.Fatalf("Target(%q) = %q, %q; want %q, %q", target, path, query, p, q)
			}
		}
		nr, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
		if err != nil || target == "*" {
			return
		}
		if !strings.HasPrefix(target, "/") && strings.Contains(target, "#") {
			return
		}
		// An absolute-form target's empty path is "/" (RFC 9112 3.2.2),
		// which net/http leaves empty, and fasthttp too for some schemes.
		decoded, ok := Unescape(nil, path, false)
		if ok && cmp.Or(string(decoded), "/") != cmp.Or(nr.URL.Path, "/") {
			t.Fatalf("target %q: the bridges decode the path to %q, net/http to %q", target, decoded, nr.URL.Path)
		}
		if string(query) != nr.URL.RawQuery {
			t.Fatalf("target %q: query %q, net/http's %q", target, query, nr.URL.RawQuery)
		}
		// The path a choice is made on under fasthttp is net/http's.
		if strings.HasPrefix(target, "/") && (!PathIs(&ctx, nr.URL.Path) || Path(&ctx) != nr.URL.Path) {
			t.Fatalf("target %q: Path %q (PathIs %v), net/http's %q", target, Path(&ctx), PathIs(&ctx, nr.URL.Path), nr.URL.Path)
		}
	})
}
