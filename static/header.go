package static

import (
	"fmt"
	"net/http"
	"strings"
)

// Header is one response header.
type Header struct{ Name, Value string }

// ParseHeader parses "Name: value": a name of token characters, and a
// value without control bytes but tabs (RFC 9110 5.1, 5.5).
func ParseHeader(s string) (Header, error) {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || strings.ContainsFunc(name, notToken) ||
		strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return Header{}, fmt.Errorf("want 'Name: value', not %q", s)
	}
	return Header{http.CanonicalHeaderKey(name), value}, nil
}

// notToken reports whether r may not be in a header name.
func notToken(r rune) bool {
	return r <= ' ' || r >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r)
}
