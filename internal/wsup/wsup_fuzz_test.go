package wsup

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// FuzzUpgrade: both front ends take the same requests for a WebSocket
// upgrade (the ASGI bridges choose a websocket scope by it, the holds an
// M0-Hold: websocket), and CheckFast takes an upgrade when CheckNet takes
// net/http's reading of the same head.
func FuzzUpgrade(f *testing.F) {
	for _, c := range [][2]string{
		{"GET", "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"},
		{"POST", "Connection: Upgrade\r\nUpgrade: websocket\r\n"},
		{"GET", "Connection: keep-alive, Upgrade\r\nUpgrade: WebSocket\r\n"},
		{"GET", "Connection: keep-alive\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"},
		{"GET", "Connection: Upgrade\r\nUpgrade: h2c, websocket\r\n"},
		{"GET", "Connection: Upgrade\r\nUpgrade: websocket/13\r\n"},
		{"get", "Connection: upgrade\r\nupgrade: websocket\r\n"},
		{"GET", "Connection: Upgradex\r\nUpgrade: websocket\r\n"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, method, headers string) {
		head := method + " /ws HTTP/1.1\r\nHost: x\r\n" + headers
		if !strings.HasSuffix(head, "\n") {
			head += "\r\n"
		}
		head += "\r\n"
		nr, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
		if err != nil {
			return
		}
		var fr fasthttp.Request
		if fr.Read(bufio.NewReader(strings.NewReader(head))) != nil {
			return
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&fr, nil, nil)
		if n, f := IsNetUpgrade(nr), IsFastUpgrade(&ctx); n != f {
			t.Fatalf("%q: an upgrade for net/http: %v, for fasthttp: %v", head, n, f)
		}
		r, ok := CheckFast(&ctx)
		if ok != CheckNet(nr) || ok && r.Header.Get("Sec-Websocket-Key") != nr.Header.Get("Sec-Websocket-Key") {
			t.Fatalf("%q: CheckFast %v, CheckNet %v", head, ok, !ok)
		}
	})
}
