package realtime

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// writeStall bounds a write to a held connection that makes no progress:
// a client that stops reading for that long (and at most a sixteenth
// more, sock.SendWindow) loses its stream.
const writeStall = 30 * time.Second

// header is one response header of a held connection beyond its own: what
// the application answered beside M0-Hold (a cookie, say).
type header struct{ name, value string }

// own are the headers a held stream sets itself, or that describe the
// application's answer rather than the stream: the application's are not
// sent. M0-* are the server's.
func own(name string) bool {
	switch strings.ToLower(name) {
	case "content-type", "content-length", "cache-control", "transfer-encoding", "connection", "keep-alive",
		"x-accel-buffering", "date", "trailer", "upgrade":
		return true
	}
	return isM0(name)
}

// isM0 reports whether a header name is the server's: M0-*, in any case.
func isM0(name string) bool {
	return len(name) >= 3 && (name[0] == 'M' || name[0] == 'm') && name[1] == '0' && name[2] == '-'
}

// sseHeaders are the headers of every SSE stream the hub serves, on
// either front end, held or not: its type, no caching, and no buffering in
// a proxy (nginx's X-Accel-Buffering).
var sseHeaders = [][2]string{
	{"Content-Type", "text/event-stream"},
	{"Cache-Control", "no-cache"},
	{"X-Accel-Buffering", "no"},
}

// eachSSEHeader calls fn with each of sseHeaders, then each of extra.
func eachSSEHeader(extra []header, fn func(name, value string)) {
	for _, h := range sseHeaders {
		fn(h[0], h[1])
	}
	for _, h := range extra {
		fn(h.name, h.value)
	}
}

// sseHead is the head of a held SSE stream, written on the connection:
// HTTP/1.1 chunks the body, HTTP/1.0 ends it by closing.
func sseHead(http11 bool, extra []header) []byte {
	var buf bytes.Buffer
	w := bufio.NewWriterSize(&buf, 512)
	wire.WriteHead(w, http11, http.StatusOK, func(fn func(name, value []byte)) {
		eachSSEHeader(extra, func(name, value string) { fn([]byte(name), []byte(value)) })
		if http11 {
			fn([]byte("Transfer-Encoding"), []byte("chunked"))
		}
	}, -1)
	w.Flush()
	return buf.Bytes()
}

// connSink writes a held stream on a connection: its head with the first
// send, then the body, chunked on HTTP/1.1.
type connSink struct {
	c       net.Conn
	head    []byte // sent with the first send
	chunked bool
	window  sock.SendWindow
}

func (s *connSink) send(b []byte) error {
	out := b[headroom:]
	if s.chunked && len(out) > 0 {
		var hx [12]byte
		size := append(strconv.AppendInt(hx[:0], int64(len(out)), 16), '\r', '\n')
		start := headroom - len(size)
		copy(b[start:], size)
		out = append(b[start:], '\r', '\n')
	}
	if s.head != nil {
		out = append(s.head, out...)
		s.head = nil
	}
	if len(out) == 0 {
		return nil
	}
	if err := s.window.Renew(s.c); err != nil {
		return err
	}
	_, err := s.c.Write(out)
	return err
}

// end ends the body cleanly: the last chunk, on HTTP/1.1.
func (s *connSink) end() {
	if s.chunked && s.window.Renew(s.c) == nil {
		io.WriteString(s.c, "0\r\n\r\n")
	}
}

// holdConn holds an SSE stream of channel on the connection c, which
// raw is as accepted (for TCP keepalive and the close watch): it replays
// what a client presenting lastID (when resume) missed, then the live
// feed, until either side ends it. A hub that drains answers a stream
// with a retry and its end.
func (h *Hub) holdConn(c, raw net.Conn, http11 bool, extra []header, channel string, resume bool, lastID string) {
	out := &connSink{c: c, head: sseHead(http11, extra), chunked: http11, window: sock.SendWindow{Window: writeStall}}
	s, err := h.Subscribe(channel, resume, lastID)
	if err != nil { // draining
		b := appendRetry(make([]byte, headroom, headroom+32))
		if out.send(b) == nil {
			out.end()
		}
		return
	}
	defer s.Close()
	sock.KeepAlive(raw, h.opts.KeepAlive)
	gone := make(chan struct{})
	if _, ok := raw.(syscall.Conn); ok {
		stop := sock.WatchClose(raw, func() { close(gone) })
		defer stop()
	} else { // no descriptor to watch (TLS): a read sees the client leave
		go func() {
			var one [1]byte
			for {
				if _, err := c.Read(one[:]); err != nil {
					close(gone)
					return
				}
			}
		}()
	}
	h.heldStreams.Add(1)
	defer h.heldStreams.Add(-1)
	if h.stream(s, out, gone) {
		out.end()
	}
}

// netSink writes a held stream through a ResponseWriter that cannot be
// hijacked (HTTP/2).
type netSink struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	window sock.SendWindow
}

func (s *netSink) send(b []byte) error {
	s.window.Renew(s.rc) // a writer without deadlines is not bounded
	if len(b) > headroom {
		if _, err := s.w.Write(b[headroom:]); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

// ServeSSE holds r as an SSE stream of channel: a client that presents a
// Last-Event-ID is sent every frame of the channel it missed, or an m0-gap
// event, then the live feed, until it leaves or the hub drains. The
// headers already set on w go out with the stream's own. HEAD is answered
// with the head alone; an invalid channel with 404.
func (h *Hub) ServeSSE(w http.ResponseWriter, r *http.Request, channel string) {
	if !ValidChannel(channel) {
		wire.Error(w, http.StatusNotFound, false)
		return
	}
	hdr := w.Header()
	for k := range hdr {
		if own(k) {
			delete(hdr, k)
		}
	}
	lastID, resume := lastEventID(r.Header)
	if r.Method == http.MethodHead {
		setSSEHeaders(hdr)
		w.WriteHeader(http.StatusOK)
		return
	}
	rc := http.NewResponseController(w)
	if r.ProtoMajor == 1 {
		if c, brw, err := rc.Hijack(); err == nil {
			defer c.Close()
			c.SetDeadline(time.Time{})
			brw.Writer.Flush()
			var extra []header
			for k, vs := range hdr {
				for _, v := range vs {
					extra = append(extra, header{k, v})
				}
			}
			h.holdConn(c, c, r.ProtoMinor >= 1, extra, channel, resume, lastID)
			return
		} else if !errors.Is(err, http.ErrNotSupported) {
			return
		}
	}
	setSSEHeaders(hdr)
	w.WriteHeader(http.StatusOK)
	out := &netSink{w: w, rc: rc, window: sock.SendWindow{Window: writeStall}}
	s, err := h.Subscribe(channel, resume, lastID)
	if err != nil {
		out.send(appendRetry(make([]byte, headroom, headroom+32)))
		return
	}
	defer s.Close()
	h.heldStreams.Add(1)
	defer h.heldStreams.Add(-1)
	h.stream(s, out, r.Context().Done())
}

func setSSEHeaders(hdr http.Header) {
	eachSSEHeader(nil, func(name, value string) { hdr[name] = []string{value} })
}

// lastEventID is the Last-Event-ID a client presented, and whether it
// presented one.
func lastEventID(h http.Header) (string, bool) {
	v := h.Values("Last-Event-Id")
	if len(v) == 0 || v[0] == "" {
		return "", false
	}
	return v[0], true
}

// fastLastEventID is lastEventID of a request fasthttp parsed.
func fastLastEventID(h *fasthttp.RequestHeader) (string, bool) {
	if v := h.Peek("Last-Event-ID"); len(v) > 0 {
		return string(v), true
	}
	return "", false
}

// serveFastSSE holds ctx's request as an SSE stream of channel, as
// ServeSSE does, on the connection fasthttp hands over. detach says the
// server keeps hijacked connections open (HoldOptions.KeepHijackedConns):
// the stream is then held on a goroutine of its own, on the accepted
// connection, so that fasthttp's request context and read buffer go back
// as soon as the hijack handler returns.
func (h *Hub) serveFastSSE(ctx *fasthttp.RequestCtx, channel string, extra []header, detach bool) {
	lastID, resume := fastLastEventID(&ctx.Request.Header)
	http11 := ctx.Request.Header.IsHTTP11()
	ctx.Response.Reset()
	ctx.SetStatusCode(http.StatusOK)
	if ctx.IsHead() {
		eachSSEHeader(extra, ctx.Response.Header.Add)
		return
	}
	raw := ctx.Conn()
	ctx.SetUserValue(wire.KeyHead, time.Now())
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		if detach {
			go func() {
				defer raw.Close()
				h.holdConn(raw, raw, http11, extra, channel, resume, lastID)
			}()
			return
		}
		defer c.Close()
		h.holdConn(c, raw, http11, extra, channel, resume, lastID)
	})
}

// Broker returns a handler that serves the hub's channels as SSE streams,
// the channel of each request named by channel (an invalid or empty name
// is a 404). It is what a Go program mounts to stream a hub; m0serve's
// holds serve the same streams.
func (h *Hub) Broker(channel func(r *http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			wire.Error(w, http.StatusMethodNotAllowed, false)
			return
		}
		h.ServeSSE(w, r, channel(r))
	})
}
