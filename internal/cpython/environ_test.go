package cpython

import (
	"encoding/binary"
	"strings"
	"testing"
)

// unpack reads a packed request buffer the way the C side does.
func unpack(t *testing.T, b []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	for len(b) > 0 {
		id := b[0]
		b = b[1:]
		var key string
		if id != 0 {
			key = EnvironKeys[id-1]
		} else {
			n := int(binary.LittleEndian.Uint16(b))
			key, b = string(b[2:2+n]), b[2+n:]
		}
		n := int(binary.LittleEndian.Uint32(b))
		out[key], b = string(b[4:4+n]), b[4+n:]
	}
	return out
}

func FuzzEnvironHeader(f *testing.F) {
	f.Add("X-Forwarded-For", "1.2.3.4")
	f.Add("content-type", "text/plain")
	f.Add("Accept", "")
	f.Fuzz(func(t *testing.T, name, value string) {
		if len(name) > 1024 {
			name = name[:1024]
		}
		var e Environ
		e.Add("REQUEST_METHOD", "GET")
		e.AddHeader(name, value)
		got := unpack(t, e.B)
		// Only ASCII letters are upper-cased, as CGI does: strings.ToUpper
		// would map "ſ" to "S" and the Kelvin sign to "K".
		key := strings.Map(func(r rune) rune {
			switch {
			case r == '-':
				return '_'
			case 'a' <= r && r <= 'z':
				return r - ('a' - 'A')
			}
			return r
		}, name)
		if key != "CONTENT_TYPE" && key != "CONTENT_LENGTH" {
			key = "HTTP_" + key
		}
		want := []byte(key)
		for i := range want {
			if want[i] >= 0x80 {
				want = nil
				break
			}
		}
		if want != nil && got[key] != value {
			t.Fatalf("AddHeader(%q, %q): environ %q", name, value, got)
		}
		if got["REQUEST_METHOD"] != "GET" || len(got) != 2 && want != nil {
			t.Fatalf("AddHeader(%q, %q) disturbed the buffer: %q", name, value, got)
		}
	})
}
