package asgi

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/wire"
	"github.com/m0serve/m0/internal/wsup"
	"github.com/valyala/fasthttp"
)

// credits is how many inbound frames may wait in the loop for the
// application to receive them before Go stops reading the socket.
const credits = 16

// answer is the application's answer to websocket.connect.
type answer struct {
	accept []byte // the accept message: the subprotocol and headers
	// status, when the handshake is refused: 403 for a close before it, 500
	// for a failure, or the status of the response the application sent in
	// its place (the WebSocket Denial Response), with head and body.
	status int
	head   []byte // packed headers
	body   []byte
	denial bool
}

// handshake waits for the application's answer to websocket.connect. A
// refusal ends the request (a receive() after it says the client left).
func (h *Handler) handshake(req *cpython.Request, method, path string) answer {
	a := h.answer(req, method, path)
	if a.status != 0 {
		req.Post(cpython.ADisconnect, 1006, nil)
		req.Done()
	}
	return a
}

func (h *Handler) answer(req *cpython.Request, method, path string) answer {
	var a answer
	for {
		m, _ := req.Next(context.Background())
		switch m.Kind {
		case cpython.CAccept:
			return answer{accept: m.Data}
		case cpython.CClose:
			return answer{status: http.StatusForbidden} // closed before the handshake
		case cpython.CStart:
			a = answer{status: m.Flags, head: m.Data, denial: true}
		case cpython.CBody:
			a.body = append(a.body, m.Data...)
			if m.Flags&cpython.FlagMore == 0 {
				return a
			}
		case cpython.CDone:
			if m.Flags&cpython.DoneQuiet != 0 {
				return answer{status: http.StatusForbidden}
			}
			h.logError(method, path, string(m.Data))
			return answer{status: http.StatusInternalServerError}
		}
	}
}

// netRefuse answers a refused handshake on net/http.
func netRefuse(w http.ResponseWriter, a answer) {
	if !a.denial {
		wire.Error(w, a.status, false)
		return
	}
	wire.NetHeader(w.Header(), a.head, int64(len(a.body)))
	w.WriteHeader(a.status)
	w.Write(a.body)
}

// fastRefuse answers a refused handshake on fasthttp.
func fastRefuse(ctx *fasthttp.RequestCtx, a answer) {
	if !a.denial {
		wire.FastError(ctx, a.status, false)
		return
	}
	resp := &ctx.Response
	resp.Header.SetNoDefaultContentType(true)
	resp.SetStatusCode(a.status)
	eachHeader(a.head, resp.Header.AddBytesKV)
	resp.SetBody(a.body)
}

// acceptHeader turns the accept message into the handshake's headers.
func acceptHeader(accept []byte) http.Header {
	hdr := http.Header{}
	if len(accept) < 4 {
		return hdr
	}
	n := int(binary.LittleEndian.Uint32(accept))
	if 4+n > len(accept) {
		return hdr
	}
	if n > 0 {
		hdr.Set("Sec-WebSocket-Protocol", string(accept[4:4+n]))
	}
	eachHeader(accept[4+n:], func(name, value []byte) {
		k := http.CanonicalHeaderKey(string(name))
		switch k {
		case "Upgrade", "Connection", "Sec-Websocket-Accept", "Content-Length":
			return
		}
		hdr[k] = append(hdr[k], string(value))
	})
	return hdr
}

func (h *Handler) netWebSocket(w http.ResponseWriter, r *http.Request) {
	if !wsup.CheckNet(r) { // refused before the application hears of it, as on fasthttp
		wsup.RefuseNet(w, r)
		return
	}
	var sc scope
	sc.net(r, h.rootPath)
	req := h.pick().Start(cpython.AWebSocket, sc.end(nil), false)
	a := h.handshake(req, r.Method, r.URL.Path)
	if a.status != 0 {
		netRefuse(w, a)
		return
	}
	conn, err := wsup.Upgrader.Upgrade(w, r, acceptHeader(a.accept))
	if err != nil { // the upgrader has answered the client
		req.Post(cpython.ADisconnect, 1006, nil)
		req.Done()
		return
	}
	h.session(conn, req, r.URL.Path)
}

func (h *Handler) fastWebSocket(ctx *fasthttp.RequestCtx) {
	hr, ok := wsup.CheckFast(ctx)
	if !ok {
		wsup.RefuseFast(ctx)
		return
	}
	var sc scope
	sc.fast(ctx, h.rootPath)
	req := h.pick().Start(cpython.AWebSocket, sc.end(nil), false)
	a := h.handshake(req, hr.Method, hr.URL.Path)
	if a.status != 0 {
		fastRefuse(ctx, a)
		return
	}
	wsup.UpgradeFast(ctx, hr, acceptHeader(a.accept),
		func(conn *websocket.Conn) { h.session(conn, req, hr.URL.Path) },
		func() {
			req.Post(cpython.ADisconnect, 1006, nil)
			req.Done()
		})
}

// wsConn is an open WebSocket: this goroutine reads frames for the
// application, and one writer goroutine sends what the application sends.
type wsConn struct {
	path    string // for log lines
	conn    *websocket.Conn
	req     *cpython.Request
	credit  chan struct{}
	stop    chan struct{} // closed when the application receives no more
	stopped sync.Once
	once    sync.Once
	life    sync.Mutex // held by the drain while it closes the connection
	gone    bool       // the session has ended: the connection may be released
	closeTO time.Duration
}

func (h *Handler) session(conn *websocket.Conn, req *cpython.Request, path string) {
	c := &wsConn{path: path, conn: conn, req: req, credit: make(chan struct{}, credits),
		stop: make(chan struct{}), closeTO: h.closeTO}
	for range credits {
		c.credit <- struct{}{}
	}
	if h.maxBody > 0 {
		conn.SetReadLimit(h.maxBody)
	}
	h.wsMu.Lock()
	h.ws[c] = struct{}{}
	draining := h.draining.Load()
	h.wsMu.Unlock()
	if draining {
		c.goingAway()
	}
	readerDone := make(chan struct{})
	writerDone := make(chan struct{})
	go c.write(h, readerDone, writerDone)
	c.read()
	close(readerDone)
	select {
	case <-writerDone:
	case <-time.After(c.closeTO):
		// The writer is stuck on a peer that reads nothing: closing the
		// connection frees it.
		conn.Close()
		<-writerDone
	}
	conn.Close()
	h.wsMu.Lock()
	delete(h.ws, c)
	h.wsMu.Unlock()
	// fasthttp releases a hijacked connection once this returns: a drain
	// still closing it must be done first.
	c.life.Lock()
	c.gone = true
	c.life.Unlock()
	req.Done()
}

// read hands each frame to the application until the peer closes or the
// connection fails; the application then hears websocket.disconnect. At
// most `credits` frames wait for the application; once it receives no more
// (it closed, or its task ended) frames are read and dropped, so the peer's
// close is still seen.
func (c *wsConn) read() {
	for {
		mt, data, err := wsup.ReadMessage(c.conn)
		var bad *wsup.InvalidMessage
		if errors.As(err, &bad) {
			c.sendClose(bad.Code, bad.Reason)
			c.stopReceiving()
			c.req.Post(cpython.ADisconnect, bad.Code, nil)
			c.conn.SetReadDeadline(time.Now().Add(c.closeTO))
			continue // read on until the peer's close reply
		}
		if err != nil {
			code, reason := websocket.CloseAbnormalClosure, ""
			var ce *websocket.CloseError
			switch {
			case errors.As(err, &ce):
				code = ce.Code
				if code != websocket.CloseAbnormalClosure { // its text is Go's, not the peer's
					reason = ce.Text
				}
			case errors.Is(err, websocket.ErrReadLimit):
				code = websocket.CloseMessageTooBig // the close gorilla sent the peer
			}
			c.req.Post(cpython.ADisconnect, code, []byte(reason))
			return
		}
		flags := 0
		if mt == websocket.TextMessage {
			flags = cpython.FlagText
		}
		select {
		case <-c.credit:
			c.req.Post(cpython.AFrame, flags, data)
		case <-c.stop:
		}
	}
}

// stopReceiving says the application receives no more frames.
func (c *wsConn) stopReceiving() { c.stopped.Do(func() { close(c.stop) }) }

// write sends what the application sends, until it closes or its task ends.
func (c *wsConn) write(h *Handler, readerDone <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		m, _ := c.req.Next(context.Background())
		switch m.Kind {
		case cpython.CWant:
			select {
			case c.credit <- struct{}{}:
			default:
			}
		case cpython.CFrame:
			mt := websocket.BinaryMessage
			if m.Flags&cpython.FlagText != 0 {
				mt = websocket.TextMessage
			}
			if err := c.conn.WriteMessage(mt, m.Data); err != nil {
				// The peer is gone: the application's sends fail from now
				// on, and the reader ends.
				c.req.Post(cpython.ADisconnect, websocket.CloseAbnormalClosure, nil)
				c.conn.Close()
			} else if m.Flags&cpython.FlagWait != 0 {
				c.req.Post(cpython.AResume, 0, nil) // what came before is on its way: the send returns
			}
		case cpython.CClose:
			c.stopReceiving()
			c.close(m.Flags, string(m.Data), readerDone)
			c.drainUntilDone()
			return
		case cpython.CDone:
			c.stopReceiving()
			code := websocket.CloseNormalClosure
			if m.Flags&cpython.DoneFailed != 0 && m.Flags&cpython.DoneQuiet == 0 {
				h.logError("GET", c.path, string(m.Data))
				code = websocket.CloseInternalServerErr
			}
			c.close(code, "", readerDone)
			return
		}
	}
}

// drainUntilDone consumes the request's messages until its task ends, so
// its slot is given back.
func (c *wsConn) drainUntilDone() {
	for {
		m, _ := c.req.Next(context.Background())
		if m.Kind == cpython.CDone {
			return
		}
	}
}

// close sends a close frame (unless one went out already: the drain's
// 1001) and waits for the peer's reply (the reader ends) for at most
// closeTO, then closes the connection.
func (c *wsConn) close(code int, reason string, readerDone <-chan struct{}) {
	c.sendClose(code, reason)
	select {
	case <-readerDone:
	case <-time.After(c.closeTO):
	}
	c.conn.Close()
}

// sendClose sends the connection's one close frame.
func (c *wsConn) sendClose(code int, reason string) {
	c.once.Do(func() {
		msg := websocket.FormatCloseMessage(code, reason)
		c.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
	})
}

// goingAway closes the connection for a drain, with 1001.
func (c *wsConn) goingAway() {
	c.life.Lock()
	defer c.life.Unlock()
	if c.gone {
		return
	}
	c.sendClose(websocket.CloseGoingAway, "server shutting down")
	c.conn.SetReadDeadline(time.Now().Add(time.Second))
}
