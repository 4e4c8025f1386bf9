package realtime

import (
	"bufio"
	"github.com/m0serve/m0/middleware"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/gorilla/websocket"
	"github.com/m0serve/m0/internal/wire"
	"github.com/m0serve/m0/internal/wsup"
	"github.com/valyala/fasthttp"
)

// The headers of the hold contract.
const (
	// HeaderHold is what a view answers to approve a hold: "stream" (SSE)
	// or "websocket".
	HeaderHold = "M0-Hold"
	// HeaderChannel names the channel a hold subscribes to, and the
	// channel of an inbound WebSocket message.
	HeaderChannel = "M0-Channel"
	// HeaderSlot numbers the held WebSocket an inbound message came from.
	HeaderSlot = "M0-Slot"
	// HeaderOpcode is an inbound message's WebSocket opcode: 1 text, 2
	// binary.
	HeaderOpcode = "M0-Opcode"
)

// MessagePath is where inbound WebSocket messages are posted.
const MessagePath = "/ws/message"

// HoldOptions are the settings of Holds. The zero value of each field is
// documented with it; nil options are the zero value.
type HoldOptions struct {
	// MessagePath is where an inbound WebSocket message is posted to the
	// handler; "" is MessagePath.
	MessagePath string
	// MaxMessage caps an inbound WebSocket message, in bytes; a larger one
	// closes the socket (1009). 0 is no cap.
	MaxMessage int64
	// Logger receives a line for each hold the application answered
	// wrongly; nil is the hub's.
	Logger *slog.Logger
	// KeepHijackedConns says that the fasthttp.Server serving the holds
	// has its KeepHijackedConns set. A held SSE stream then lets go of
	// fasthttp's request context and read buffer (ReadBufferSize, 4 KiB
	// by default), which fasthttp otherwise keeps for as long as the
	// stream is held. Set it only then: on a server that closes hijacked
	// connections it would end every stream at once. net/http ignores it.
	KeepHijackedConns bool
}

// Holds returns middleware through which a handler holds connections in Go:
// a response that carries M0-Hold: stream with M0-Channel: NAME (status
// 200) becomes an SSE stream of the channel, replaying what a reconnecting
// client missed; M0-Hold: websocket on an upgrade request becomes a
// WebSocket subscribed to it, whose inbound messages are posted to the
// handler at MessagePath. The handler's thread is free as soon as it
// answers. M0-* headers a client sends never reach the handler. While the
// hub drains, a request for an event stream is answered with a retry, not
// passed on, so no browser gives up on it.
//
// Around a handler that serves fasthttp too, the handler returned is one
// too.
func Holds(hub *Hub, opts *HoldOptions) func(http.Handler) http.Handler {
	var o HoldOptions
	if opts != nil {
		o = *opts
	}
	if o.MessagePath == "" {
		o.MessagePath = MessagePath
	}
	if o.Logger == nil {
		o.Logger = hub.log
	}
	return func(next http.Handler) http.Handler {
		hd := &holds{hub: hub, opts: o, next: next}
		if fh, ok := next.(middleware.FastHandler); ok {
			return &fastHolds{holds: hd, fast: fh.ServeFastHTTP}
		}
		return hd
	}
}

type holds struct {
	hub   *Hub
	opts  HoldOptions
	next  http.Handler
	slots atomic.Uint64
}

// ServeHTTP serves r with the handler, and holds the connection when its
// answer asks.
func (hd *holds) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k := range r.Header {
		if isM0(k) {
			r = r.Clone(r.Context())
			for k := range r.Header {
				if isM0(k) {
					delete(r.Header, k)
				}
			}
			break
		}
	}
	if hd.hub.Draining() && wantsStream(r.Header.Get("Accept")) {
		hd.hub.ServeSSE(w, r, retryChannel)
		return
	}
	hw := NewHoldWriter(w)
	hd.next.ServeHTTP(hw, r)
	held, status := hw.Held()
	if !held {
		return
	}
	hdr := w.Header()
	kind, channel := hdr.Get(HeaderHold), hdr.Get(HeaderChannel)
	if !hd.valid(kind, channel, status, wsup.IsNetUpgrade(r), r.Method, r.URL.Path) {
		for k := range hdr {
			delete(hdr, k)
		}
		wire.Error(w, http.StatusInternalServerError, false)
		return
	}
	if wire.EqualFold(kind, "stream") {
		hd.hub.ServeSSE(w, r, channel)
		return
	}
	up := http.Header{}
	for k, vs := range hdr {
		if !own(k) && !strings.HasPrefix(k, "Sec-Websocket-") {
			up[k] = vs
		}
	}
	conn, err := wsup.Upgrader.Upgrade(w, r, up)
	if err != nil {
		return // the upgrader answered the client
	}
	hd.holdSocket(conn, conn.NetConn(), r, channel)
}

// retryChannel is a channel name no hold uses: a stream of it while the
// hub drains is the retry alone.
const retryChannel = "m0-drain"

func wantsStream(accept string) bool { return strings.Contains(accept, "text/event-stream") }

// valid checks a hold the application answered, and logs what is wrong.
func (hd *holds) valid(kind, channel string, status int, upgrade bool, method, path string) bool {
	why := ""
	switch {
	case status != http.StatusOK:
		why = "a hold is answered with status 200, not " + http.StatusText(status)
	case !wire.EqualFold(kind, "stream") && !wire.EqualFold(kind, "websocket"):
		why = "M0-Hold is stream or websocket, not " + quote(kind)
	case !ValidChannel(channel):
		why = "M0-Channel " + quote(channel) + " is not a channel name (1 to 1024 bytes, the first not a control byte)"
	case wire.EqualFold(kind, "websocket") && !upgrade:
		why = "M0-Hold: websocket answers a WebSocket upgrade request, and this is none"
	}
	if why == "" {
		return true
	}
	hd.opts.Logger.Error("realtime: the application's hold is refused", "method", method, "path", path, "error", why)
	return false
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return `"` + s + `"`
}

// HoldWriter is the ResponseWriter of a handler whose answer may approve a
// hold: a response carrying M0-Hold is kept from the client, its header
// and its body, and Held says so once the handler has returned. Holds
// serves its handler through one; so does a server that refuses holds
// where they cannot be kept (the Go host's pool threads).
type HoldWriter struct {
	http.ResponseWriter
	wrote  bool
	held   bool
	status int
}

// NewHoldWriter returns a HoldWriter writing to w.
func NewHoldWriter(w http.ResponseWriter) *HoldWriter { return &HoldWriter{ResponseWriter: w} }

// Held reports, once the handler has returned, whether its response
// approved a hold (with nothing of it sent), and with which status.
func (w *HoldWriter) Held() (bool, int) {
	if !w.wrote && w.Header().Get(HeaderHold) != "" {
		w.held, w.status = true, http.StatusOK
	}
	return w.held, w.status
}

func (w *HoldWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if w.Header().Get(HeaderHold) != "" {
		w.held, w.status = true, code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *HoldWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.held {
		return len(p), nil // a hold's body is not sent
	}
	return w.ResponseWriter.Write(p)
}

func (w *HoldWriter) ReadFrom(r io.Reader) (int64, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.held {
		return io.Copy(io.Discard, r)
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w.ResponseWriter, r)
}

func (w *HoldWriter) Flush() {
	if !w.held {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *HoldWriter) FlushError() error {
	if w.held {
		return nil
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *HoldWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *HoldWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type fastHolds struct {
	*holds
	fast fasthttp.RequestHandler
}

// ServeFastHTTP serves ctx with the handler, and holds the connection when
// its answer asks.
func (hd *fastHolds) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	var m0 [][]byte
	for k := range ctx.Request.Header.All() {
		if isM0(string(k)) {
			m0 = append(m0, append([]byte(nil), k...))
		}
	}
	for _, k := range m0 {
		ctx.Request.Header.DelBytes(k)
	}
	if hd.hub.Draining() && wantsStream(string(ctx.Request.Header.Peek("Accept"))) {
		hd.hub.serveFastSSE(ctx, retryChannel, nil, hd.opts.KeepHijackedConns)
		return
	}
	hd.fast(ctx)
	resp := &ctx.Response.Header
	kind := string(resp.Peek(HeaderHold))
	if kind == "" {
		return
	}
	channel := string(resp.Peek(HeaderChannel))
	method, path := string(ctx.Method()), wire.Path(ctx)
	if ctx.Hijacked() || !hd.valid(kind, channel, resp.StatusCode(), wsup.IsFastUpgrade(ctx), method, path) {
		if !ctx.Hijacked() {
			wire.FastError(ctx, http.StatusInternalServerError, false)
		}
		return
	}
	var extra []header
	for k, v := range resp.All() {
		if !own(string(k)) {
			extra = append(extra, header{string(k), string(v)})
		}
	}
	if wire.EqualFold(kind, "stream") {
		hd.hub.serveFastSSE(ctx, channel, extra, hd.opts.KeepHijackedConns)
		return
	}
	r, ok := wsup.CheckFast(ctx)
	if !ok {
		wsup.RefuseFast(ctx)
		return
	}
	up := http.Header{}
	for _, e := range extra {
		if !strings.HasPrefix(http.CanonicalHeaderKey(e.name), "Sec-Websocket-") {
			up.Add(e.name, e.value)
		}
	}
	ctx.Response.Reset()
	raw := ctx.Conn()
	wsup.UpgradeFast(ctx, r, up, func(conn *websocket.Conn) { hd.holdSocket(conn, raw, r, channel) }, func() {})
}
