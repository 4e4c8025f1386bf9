package wsgi

import (
	"strings"
	"testing"
)

func TestSplitHostPort(t *testing.T) {
	for _, tt := range []struct {
		in, host, port string
		ok             bool
	}{
		{"127.0.0.1:8000", "127.0.0.1", "8000", true},
		{"example.com:80", "example.com", "80", true},
		{"[::1]:8000", "::1", "8000", true},
		{"[::ffff:1.2.3.4]:5", "::ffff:1.2.3.4", "5", true},
		{"example.com", "", "", false},
		{"example.com:", "", "", false},
		{"::1", "", "", false},
		{"[::1]", "", "", false},
		{"host:8x", "", "", false},
		{"", "", "", false},
	} {
		host, port, ok := splitHostPort(tt.in)
		if host != tt.host || port != tt.port || ok != tt.ok {
			t.Errorf("splitHostPort(%q) = %q %q %v, want %q %q %v", tt.in, host, port, ok, tt.host, tt.port, tt.ok)
		}
	}
}

func FuzzSplitHostPort(f *testing.F) {
	for _, s := range []string{"127.0.0.1:8000", "[::1]:80", "x", ":", "[]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		host, port, ok := splitHostPort(s)
		if !ok {
			if host != "" || port != "" {
				t.Fatalf("splitHostPort(%q) refused with %q %q", s, host, port)
			}
			return
		}
		// What it splits joins back: SERVER_NAME and SERVER_PORT are the
		// Host header's, brackets off an IPv6 address.
		joined := host + ":" + port
		if strings.Contains(host, ":") || strings.HasPrefix(s, "[") && strings.HasSuffix(s[:len(s)-len(port)-1], "]") {
			joined = "[" + host + "]:" + port
		}
		if port == "" || strings.Trim(port, "0123456789") != "" || joined != s {
			t.Fatalf("splitHostPort(%q) = %q %q", s, host, port)
		}
	})
}
