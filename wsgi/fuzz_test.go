package wsgi

import (
	"net/url"
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
