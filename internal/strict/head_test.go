package strict

import (
	"strings"
	"testing"
)

func TestCheckHead(t *testing.T) {
	for _, tc := range []struct {
		head   string
		status int // 0: accepted
		fr     Framing
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0, Framing{}},
		{"GET / HTTP/1.0\r\n\r\n", 0, Framing{}},
		{"GET / HTTP/1.2\r\nHost: x\r\n\r\n", 0, Framing{}},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n", 0, Framing{Length: 12}},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked \r\n\r\n", 0, Framing{Chunked: true}},
		{"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\r\n", 0, Framing{Upgrade: true}},
		{"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n\r\n", 0, Framing{}},
		{"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 0, Framing{}},
		{"GET http://x/a HTTP/1.1\r\nHost: x\r\n\r\n", 0, Framing{}},
		{"GET / HTTP/9.9\r\nHost: x\r\n\r\n", 505, Framing{}},
		{"GET / http/1.1\r\nHost: x\r\n\r\n", 400, Framing{}},
		{"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400, Framing{}},
		{"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", 400, Framing{}},
		{"GET /a?q=\xff HTTP/1.1\r\nHost: x\r\n\r\n", 400, Framing{}},
		{"GET /a#\x80 HTTP/1.1\r\nHost: x\r\n\r\n", 400, Framing{}},
		{"GET /caf%C3%A9?q=%FF HTTP/1.1\r\nHost: x\r\n\r\n", 0, Framing{}},
		{"GET /a?b=1#frag HTTP/1.1\r\nHost: x\r\n\r\n", 0, Framing{}},
		{"CONNECT x:443 HTTP/1.1\r\nHost: x\r\n\r\n", 501, Framing{}},
		{"GET / HTTP/1.1\r\n\r\n", 400, Framing{}},
		{"GET / HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n", 400, Framing{}},
		{"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", 400, Framing{}},
		{"GET / HTTP/1.1\r\nHost: x\r\nX : a\r\n\r\n", 400, Framing{}},
		{"GET / HTTP/1.1\r\nHost: x\r\nX: a\x00\r\n\r\n", 400, Framing{}},
		{"GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", 400, Framing{}},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400, Framing{}},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", 400, Framing{}},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\n", 400, Framing{}},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999999999999999\r\n\r\n", 400, Framing{}},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, Framing{}},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, Framing{}},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400, Framing{}},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400, Framing{}},
		{"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, Framing{}},
		{"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n", 0, Framing{Length: 1}},
		{"POST / HTTP/1.1\r\nHost: x\r\nExpect: later\r\n\r\n", 417, Framing{}},
		{"GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X: y\r\n", MaxHeaderLines) + "\r\n", 431, Framing{}},
	} {
		fr, r := CheckHead([]byte(tc.head))
		switch {
		case tc.status == 0 && r != nil:
			t.Errorf("%q: refused %d %s", tc.head, r.Status, r.Reason)
		case tc.status != 0 && r == nil:
			t.Errorf("%q: accepted, want %d", tc.head, tc.status)
		case tc.status != 0 && r.Status != tc.status:
			t.Errorf("%q: %d %s, want %d", tc.head, r.Status, r.Reason, tc.status)
		case tc.status == 0 && fr != tc.fr:
			t.Errorf("%q: framing %+v, want %+v", tc.head, fr, tc.fr)
		}
	}
}
