package wsgi

import (
	"net/url"
	"strconv"
	"testing"
)

func FuzzUnescapePath(f *testing.F) {
	for _, s := range []string{"/", "/caf%C3%A9", "/a%2Fb", "/%zz", "/%", "/%4", "/x%00y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		got, ok := unescapePath(nil, []byte(path))
		want, err := url.PathUnescape(path)
		if ok != (err == nil) {
			t.Fatalf("unescapePath(%q) ok=%v, url.PathUnescape err=%v", path, ok, err)
		}
		if ok && string(got) != want {
			t.Fatalf("unescapePath(%q) = %q, want %q", path, got, want)
		}
	})
}

func FuzzParseLength(f *testing.F) {
	for _, s := range []string{"0", "42", "", "-1", "1e3", "99999999999999999999", " 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := parseLength([]byte(s))
		n, err := strconv.ParseInt(s, 10, 64)
		valid := err == nil && n >= 0 && len(s) <= 18 && s[0] != '+' && s[0] != '-'
		if valid && got != n || !valid && got != -1 {
			t.Fatalf("parseLength(%q) = %d (ParseInt: %d, %v)", s, got, n, err)
		}
	})
}
