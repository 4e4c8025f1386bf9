package realtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/wsup"
)

// closeWait is how long a closing socket waits for the peer's close reply.
const closeWait = time.Second

// holdSocket holds a WebSocket subscribed to channel: the channel's frames
// go out as messages (text when the data is UTF-8, binary otherwise), a
// ping when it has been idle for the hub's Heartbeat; each message the
// client sends is posted to the handler, in order. It returns when either
// side closes, or the hub lets go (1001 when it drains, 1013 when the
// client was too slow). raw is the connection as accepted, where TCP
// keepalive is set (fasthttp's hijacked one has no descriptor to reach).
func (hd *holds) holdSocket(conn *websocket.Conn, raw net.Conn, r *http.Request, channel string) {
	defer conn.Close()
	h := hd.hub
	s, err := h.Subscribe(channel, false, "")
	if err != nil { // draining
		closeSocket(conn, websocket.CloseGoingAway, "server shutting down")
		return
	}
	defer s.Close()
	sock.KeepAlive(raw, h.opts.KeepAlive)
	if hd.opts.MaxMessage > 0 {
		conn.SetReadLimit(hd.opts.MaxMessage)
	}
	slot := hd.slots.Add(1)
	h.heldSockets.Add(1)
	defer h.heldSockets.Add(-1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			mt, data, err := wsup.ReadMessage(conn)
			var bad *wsup.InvalidMessage
			if errors.As(err, &bad) {
				// Nothing of it is posted: the close goes out, and the
				// peer has closeWait to answer it.
				closeSocket(conn, bad.Code, bad.Reason)
				cancel()
				conn.SetReadDeadline(time.Now().Add(closeWait))
				for {
					if _, _, err := conn.NextReader(); err != nil {
						return
					}
				}
			}
			if err != nil {
				cancel()
				return
			}
			hd.post(ctx, r, channel, slot, mt, data)
		}
	}()

	idle := newIdleTimer(h.opts.Heartbeat)
	defer idle.stop()
	for {
		var err error
		select {
		case f := <-s.C():
			conn.SetWriteDeadline(time.Now().Add(writeStall))
			mt := websocket.BinaryMessage
			if utf8.Valid(f.Data) {
				mt = websocket.TextMessage
			}
			err = conn.WriteMessage(mt, f.Data)
		case <-idle.C:
			err = conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeStall))
		case <-s.Done():
			if s.Drained() {
				closeSocket(conn, websocket.CloseGoingAway, "server shutting down")
			} else {
				closeSocket(conn, websocket.CloseTryAgainLater, "too slow")
			}
			waitClosed(conn, gone, cancel)
			return
		case <-gone:
			return
		}
		if err != nil {
			return
		}
		idle.sent()
	}
}

// closeSocket sends a close frame.
func closeSocket(conn *websocket.Conn, code int, reason string) {
	conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(closeWait))
}

// waitClosed gives the peer closeWait to answer the close, then closes,
// and calls off the message being posted, if one waits for a thread, so
// that the socket's end does not wait for a queue.
func waitClosed(conn *websocket.Conn, gone <-chan struct{}, cancel func()) {
	select {
	case <-gone:
	case <-time.After(closeWait):
	}
	conn.Close()
	cancel()
	<-gone
}

// post hands an inbound message to the handler: a POST to MessagePath with
// the upgrade request's headers (its cookies: the application knows whose
// socket it is), M0-Channel, M0-Slot and M0-Opcode, and the message as its
// body. What the handler answers is not sent anywhere; an error status is
// logged.
func (hd *holds) post(ctx context.Context, r *http.Request, channel string, slot uint64, mt int, data []byte) {
	hdr := http.Header{}
	for k, vs := range r.Header {
		switch k {
		case "Connection", "Upgrade", "Content-Length", "Content-Type", "Transfer-Encoding":
			continue
		}
		if isM0(k) || len(k) > 14 && k[:14] == "Sec-Websocket-" {
			continue
		}
		hdr[k] = vs
	}
	hdr.Set(HeaderChannel, channel)
	hdr.Set(HeaderSlot, strconv.FormatUint(slot, 10))
	hdr.Set(HeaderOpcode, strconv.Itoa(mt))
	if mt == websocket.TextMessage {
		hdr.Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		hdr.Set("Content-Type", "application/octet-stream")
	}
	hdr.Set("Content-Length", strconv.Itoa(len(data)))
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Path: hd.opts.MessagePath},
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        hdr,
		Body:          io.NopCloser(bytes.NewReader(data)),
		ContentLength: int64(len(data)),
		Host:          r.Host,
		RemoteAddr:    r.RemoteAddr,
		RequestURI:    hd.opts.MessagePath,
		TLS:           r.TLS,
	}).WithContext(ctx)
	w := &postWriter{hdr: http.Header{}}
	hd.next.ServeHTTP(w, req)
	if w.status >= 400 {
		hd.opts.Logger.Warn("realtime: the application refused a WebSocket message", "path", hd.opts.MessagePath,
			"status", w.status, "channel", channel, "slot", slot)
	}
}

// postWriter takes the handler's answer to an inbound message.
type postWriter struct {
	hdr    http.Header
	status int
}

func (w *postWriter) Header() http.Header { return w.hdr }
func (w *postWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *postWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}
