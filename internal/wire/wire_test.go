package wire

import (
	"encoding/binary"
	"net/url"
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

func TestForward(t *testing.T) {
	in := [][2]string{{"Content-Type", "text/plain"}, {"content-length", "12"}, {"Transfer-Encoding", "chunked"},
		{"Keep-Alive", "timeout=5"}, {"Trailer", "X"}, {"X-A", "1"}}
	var packed []byte
	for _, h := range in {
		packed = binary.LittleEndian.AppendUint32(packed, uint32(len(h[0])))
		packed = append(packed, h[0]...)
		packed = binary.LittleEndian.AppendUint32(packed, uint32(len(h[1])))
		packed = append(packed, h[1]...)
	}
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
