package wire

import (
	"encoding/binary"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"testing"
)

func FuzzParseLength(f *testing.F) {
	for _, s := range []string{"0", "42", "", "-1", "1e3", "99999999999999999999", " 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ParseLength([]byte(s))
		n, err := strconv.ParseInt(s, 10, 64)
		valid := err == nil && n >= 0 && len(s) <= 18 && s[0] != '+' && s[0] != '-'
		if valid && got != n || !valid && got != -1 {
			t.Fatalf("ParseLength(%q) = %d (ParseInt: %d, %v)", s, got, n, err)
		}
	})
}

// pack packs headers as the bridges do.
func pack(in ...[2]string) []byte {
	var packed []byte
	for _, h := range in {
		packed = binary.LittleEndian.AppendUint32(packed, uint32(len(h[0])))
		packed = append(packed, h[0]...)
		packed = binary.LittleEndian.AppendUint32(packed, uint32(len(h[1])))
		packed = append(packed, h[1]...)
	}
	return packed
}

func TestForward(t *testing.T) {
	packed := pack([2]string{"Content-Type", "text/plain"}, [2]string{"content-length", "12"}, [2]string{"Transfer-Encoding", "chunked"},
		[2]string{"Keep-Alive", "timeout=5"}, [2]string{"Trailer", "X"}, [2]string{"X-A", "1"})
	var out []string
	n := Forward(packed, func(name, value []byte) { out = append(out, string(name)+": "+string(value)) })
	if n != 12 || len(out) != 2 || out[0] != "Content-Type: text/plain" || out[1] != "X-A: 1" {
		t.Fatalf("Forward: %d %q", n, out)
	}
}

func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"/", "/caf%C3%A9", "/a%2Fb", "/%zz", "/%", "/%4", "/x%00y", "/%%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		got, ok := Unescape(nil, []byte(path), false)
		want, err := url.PathUnescape(path)
		if ok != (err == nil) {
			t.Fatalf("Unescape(%q) ok=%v, url.PathUnescape err=%v", path, ok, err)
		}
		if ok && string(got) != want {
			t.Fatalf("Unescape(%q) = %q, want %q", path, got, want)
		}
		lenient, lok := Unescape(nil, []byte(path), true)
		if !lok || ok && string(lenient) != want || len(lenient) > len(path) {
			t.Fatalf("lenient Unescape(%q) = %q, %v (strict %q, %v)", path, lenient, lok, got, ok)
		}
	})
}

func TestNetHeader(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		hdr := http.Header{}
		NetHeader(hdr, pack([2]string{"x-a", "1"}, [2]string{"set-cookie", "a=1"}, [2]string{"Set-Cookie", "b=2"},
			[2]string{"Content-Length", "99"}), 5)
		if !reflect.DeepEqual(hdr["X-A"], []string{"1"}) || !reflect.DeepEqual(hdr["Set-Cookie"], []string{"a=1", "b=2"}) {
			t.Errorf("headers: %v", hdr)
		}
		if v, ok := hdr["Content-Type"]; !ok || v != nil {
			t.Errorf("no Content-Type from the application: %q, %v (want nil, so net/http sniffs none)", v, ok)
		}
		if _, err := http.ParseTime(hdr.Get("Date")); err != nil {
			t.Errorf("Date %q: %v", hdr.Get("Date"), err)
		}
		if hdr.Get("Content-Length") != "5" || len(hdr["Content-Length"]) != 1 {
			t.Errorf("Content-Length: %q (the server's measure, not the application's)", hdr["Content-Length"])
		}
	})
	t.Run("after a middleware", func(t *testing.T) {
		hdr := http.Header{}
		hdr.Set("Content-Type", "application/json")
		hdr.Set("X-Frame-Options", "SAMEORIGIN")
		hdr.Set("X-Request-Id", "r1")
		hdr.Add("Set-Cookie", "mw=1")
		hdr.Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT")
		hdr.Set("Vary", "Origin")
		hdr.Set("Content-Length", "3") // for a body the middleware did not write
		NetHeader(hdr, pack([2]string{"X-Frame-Options", "DENY"}, [2]string{"x-frame-options", "X"},
			[2]string{"Set-Cookie", "app=1"}, [2]string{"Vary", "Cookie"}), -1)
		want := http.Header{
			"Content-Type":    {"application/json"}, // the middleware's: the application named none
			"X-Frame-Options": {"DENY", "X"},        // the application's replace the middleware's
			"X-Request-Id":    {"r1"},
			"Set-Cookie":      {"mw=1", "app=1"}, // added alongside
			"Vary":            {"Origin", "Cookie"},
			"Date":            {"Mon, 02 Jan 2006 15:04:05 GMT"},
		}
		if !reflect.DeepEqual(hdr, want) {
			t.Errorf("got %v\nwant %v", hdr, want)
		}
	})
}

func TestUnderPrefix(t *testing.T) {
	for _, c := range []struct {
		path, prefix, rest string
		ok                 bool
	}{
		{"/a/b", "/a", "/b", true},
		{"/a", "/a", "", true},
		{"/a/", "/a", "/", true},
		{"/ab", "/a", "", false},
		{"/", "/a", "", false},
		{"/b/a", "/a", "", false},
		{"/x", "", "/x", true},
		{"/a/b/c", "/a/b", "/c", true},
	} {
		rest, ok := UnderPrefix(c.path, c.prefix)
		if rest != c.rest || ok != c.ok {
			t.Errorf("UnderPrefix(%q, %q) = %q, %v; want %q, %v", c.path, c.prefix, rest, ok, c.rest, c.ok)
		}
	}
}

func TestEqualFold(t *testing.T) {
	for _, c := range []struct {
		name, s string
		want    bool
	}{
		{"host", "Host", true},
		{"HOST", "Host", true},
		{"Hoſt", "Host", false},          // U+017F folds to s in Unicode, not here
		{"Coo\u212aie", "Cookie", false}, // the Kelvin sign
		{"Hos", "Host", false},
		{"content-length", "Content-Length", true},
		{"Content\rtYpe", "Content-Type", false}, // \r is - but for bit 0x20
		{"x\x11", "x1", false},
		{"X-1", "x-1", true},
	} {
		if got := EqualFold(c.name, c.s); got != c.want {
			t.Errorf("EqualFold(%q, %q) = %v", c.name, c.s, got)
		}
		if got := EqualFold([]byte(c.name), c.s); got != c.want {
			t.Errorf("EqualFold([]byte(%q), %q) = %v", c.name, c.s, got)
		}
	}
}
