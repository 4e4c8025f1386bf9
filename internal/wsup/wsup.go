// Package wsup upgrades a request to a WebSocket under either front end,
// with gorilla/websocket: what the ASGI bridge and the realtime holds share.
package wsup

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// Upgrader is the one every upgrade uses. The application decides whom it
// accepts, as under uvicorn: it sees the Origin header.
var Upgrader = websocket.Upgrader{
	CheckOrigin:       func(*http.Request) bool { return true },
	ReadBufferSize:    4096,
	WriteBufferSize:   4096,
	EnableCompression: false,
}

// IsNetUpgrade reports whether r asks for a WebSocket: a GET whose
// Connection lines name upgrade and whose Upgrade lines name websocket
// (ASCII case ignored), as IsFastUpgrade reads a request fasthttp parsed.
func IsNetUpgrade(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	has := func(lines []string, tok string) bool {
		for _, line := range lines {
			for part := range strings.SplitSeq(line, ",") {
				if p := strings.Trim(part, " \t"); len(p) == len(tok) && strings.EqualFold(p, tok) && isASCII(p) {
					return true
				}
			}
		}
		return false
	}
	return has(r.Header["Connection"], "upgrade") && has(r.Header["Upgrade"], "websocket")
}

// IsFastUpgrade reports whether ctx's request asks for a WebSocket, as
// IsNetUpgrade.
func IsFastUpgrade(ctx *fasthttp.RequestCtx) bool {
	h := &ctx.Request.Header
	return ctx.IsGet() && hasToken(h.PeekAll("Connection"), "upgrade") && hasToken(h.PeekAll("Upgrade"), "websocket")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func hasToken(lines [][]byte, tok string) bool {
	for _, v := range lines {
		for part := range bytes.SplitSeq(v, []byte(",")) {
			if wire.EqualFold(bytes.Trim(part, " \t"), tok) {
				return true
			}
		}
	}
	return false
}

// NetRequest is ctx's request as an http.Request: what the upgrader reads,
// and what a handler called for the connection's sake is given.
func NetRequest(ctx *fasthttp.RequestCtx) (*http.Request, error) {
	u, err := url.ParseRequestURI(string(ctx.RequestURI()))
	if err != nil {
		return nil, err
	}
	r := &http.Request{
		Method:     string(ctx.Method()),
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     http.Header{},
		Host:       string(ctx.Host()),
		RemoteAddr: ctx.RemoteAddr().String(),
		RequestURI: string(ctx.RequestURI()),
	}
	for k, v := range ctx.Request.Header.All() {
		name := http.CanonicalHeaderKey(string(k))
		r.Header[name] = append(r.Header[name], string(v))
	}
	return r, nil
}

// CheckFast returns the request a valid upgrade of ctx reads as, or false
// when the upgrade is malformed (RefuseFast is then its answer): the
// checks of RFC 6455 4.2.1 the upgrader makes on net/http.
func CheckFast(ctx *fasthttp.RequestCtx) (*http.Request, bool) {
	r, err := NetRequest(ctx)
	if err != nil || !CheckNet(r) {
		return nil, false
	}
	return r, true
}

// CheckNet reports whether r is a valid upgrade (RFC 6455 4.2.1), which
// the upgrader would take; RefuseNet answers one that is not.
func CheckNet(r *http.Request) bool {
	return websocket.IsWebSocketUpgrade(r) && validKey(r.Header.Get("Sec-Websocket-Key")) &&
		r.Header.Get("Sec-Websocket-Version") == "13"
}

// RefuseNet answers a malformed upgrade (CheckNet's false) as RefuseFast
// does.
func RefuseNet(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Sec-Websocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
	}
	wire.Error(w, http.StatusBadRequest, false)
}

// RefuseFast answers a malformed upgrade (CheckFast's false) with 400, and
// names the version spoken when the client asked for another (RFC 6455
// 4.4), as the upgrader does on net/http.
func RefuseFast(ctx *fasthttp.RequestCtx) {
	wire.FastError(ctx, http.StatusBadRequest, false)
	if string(ctx.Request.Header.Peek("Sec-WebSocket-Version")) != "13" {
		ctx.Response.Header.Set("Sec-WebSocket-Version", "13")
	}
}

// validKey reports whether k is a Sec-WebSocket-Key: 16 bytes in base64.
func validKey(k string) bool {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k))
	return err == nil && len(b) == 16
}

// UpgradeFast answers ctx's upgrade (r, from CheckFast) with hdr and hands
// the connection to serve, on the goroutine fasthttp hijacks it on; failed
// runs instead when the handshake fails. The access log hears of the
// handshake here, as fasthttp writes nothing (wire.KeyHead, wire.KeySent).
func UpgradeFast(ctx *fasthttp.RequestCtx, r *http.Request, hdr http.Header, serve func(*websocket.Conn), failed func()) {
	ctx.SetStatusCode(fasthttp.StatusSwitchingProtocols)
	ctx.SetUserValue(wire.KeyHead, time.Now())
	ctx.SetUserValue(wire.KeySent, int64(0))
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		defer c.Close() // for a server that keeps hijacked connections
		conn, err := Upgrader.Upgrade(&hijacked{c: c, h: http.Header{}}, r, hdr)
		if err != nil {
			failed()
			return
		}
		serve(conn)
	})
}

// hijacked is the ResponseWriter the upgrader takes over a connection
// fasthttp handed over.
type hijacked struct {
	c net.Conn
	h http.Header
}

func (w *hijacked) Header() http.Header { return w.h }
func (w *hijacked) WriteHeader(int)     {}
func (w *hijacked) Write([]byte) (int, error) {
	return 0, errors.New("wsup: write to a hijacked connection")
}
func (w *hijacked) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.c, bufio.NewReadWriter(bufio.NewReader(w.c), bufio.NewWriter(w.c)), nil
}

// InvalidMessage is a message a peer sent that fails the connection (RFC
// 6455 8.1): Code and Reason are the close frame to answer it with.
type InvalidMessage struct {
	Code   int
	Reason string
}

func (e *InvalidMessage) Error() string { return "wsup: " + e.Reason }

// ReadMessage reads conn's next message, as conn.ReadMessage does: a
// fragmented one whole, so a UTF-8 sequence may be split across its frames.
// A text message that is not UTF-8 is returned with an *InvalidMessage
// (1007): the caller closes with it and delivers nothing. Every reader of
// a client's messages reads through it.
func ReadMessage(conn *websocket.Conn) (mt int, data []byte, err error) {
	mt, data, err = conn.ReadMessage()
	if err == nil && mt == websocket.TextMessage && !utf8.Valid(data) {
		return mt, nil, &InvalidMessage{Code: websocket.CloseInvalidFramePayloadData, Reason: "invalid UTF-8"}
	}
	return mt, data, err
}
