package asgi

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// ServeFastHTTP serves a request that fasthttp parsed: the same bridge as
// ServeHTTP without net/http's costs per request. m0serve's own listener
// uses it. fasthttp has read the whole body (within the server's cap)
// before the handler runs; the application receives it in chunks.
func (h *Handler) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	if isFastUpgrade(ctx) {
		h.fastWebSocket(ctx)
		return
	}
	body := ctx.PostBody()
	if h.maxBody >= 0 && int64(len(body)) > h.maxBody {
		ctx.Error("Request Entity Too Large", fasthttp.StatusRequestEntityTooLarge)
		return
	}
	x := fastExchanges.Get().(*fastExchange)
	x.h, x.ctx = h, ctx
	x.sc.fast(ctx, h.rootPath)
	first := body
	if len(first) > chunkSize {
		first = first[:chunkSize]
	}
	x.rest = body[len(first):]
	x.r = h.ex.Start(cpython.AHTTP, x.sc.end(first), len(x.rest) > 0)
	if x.respond() {
		x.release()
	}
	// Otherwise fasthttp reads the body from x after this returns; x
	// releases itself in Close.
}

// fastExchange is a request that fasthttp parsed, in the loop.
type fastExchange struct {
	h      *Handler
	ctx    *fasthttp.RequestCtx
	sc     scope
	r      *cpython.Request
	rest   []byte // the body the application has not asked for yet
	status int
	head   []byte
	part   []byte // a streamed chunk not yet taken
	ended  bool
	endErr error
	resume bool   // the application waits for the last chunk to be taken
	sent   *int64 // where the bytes of a streamed body are counted (m0.SentCounter)
}

var fastExchanges = sync.Pool{New: func() any { return &fastExchange{} }}

func (x *fastExchange) release() {
	x.r.Done()
	x.h, x.ctx, x.r, x.rest, x.head, x.part, x.sent = nil, nil, nil, nil, nil, nil, nil
	x.status, x.ended, x.endErr, x.resume = 0, false, nil, false
	if cap(x.sc.b) > 64<<10 {
		x.sc.b = nil
	}
	fastExchanges.Put(x)
}

// feed gives the application the next chunk of the body.
func (x *fastExchange) feed() {
	chunk := x.rest
	if len(chunk) > chunkSize {
		chunk = chunk[:chunkSize]
	}
	x.rest = x.rest[len(chunk):]
	flags := 0
	if len(x.rest) > 0 {
		flags = cpython.FlagMore
	}
	x.r.Post(cpython.ABody, flags, chunk)
}

// respond waits for the response and hands it to fasthttp. It reports
// whether the exchange is over (false: a streamed body follows).
func (x *fastExchange) respond() bool {
	resp := &x.ctx.Response
	for {
		m, _ := x.r.Next(context.Background())
		switch m.Kind {
		case cpython.CWant:
			x.feed()
		case cpython.CStart:
			x.status, x.head = m.Flags, m.Data
		case cpython.CBody:
			resp.Header.SetNoDefaultContentType(true)
			resp.SetStatusCode(x.status)
			appLength := eachHeader(x.head, resp.Header.AddBytesKV)
			if m.Flags&cpython.FlagMore == 0 {
				switch {
				case !bodyAllowed(x.status):
				case x.ctx.IsHead() && appLength >= 0 && len(m.Data) == 0:
					resp.SkipBody = true
					resp.Header.SetContentLength(int(appLength))
				default:
					resp.SetBody(m.Data)
				}
				return true
			}
			x.part, x.resume = m.Data, m.Flags&cpython.FlagWait != 0
			if appLength >= 0 || !x.ctx.Request.Header.IsHTTP11() {
				x.streamDirect(appLength)
				return true
			}
			resp.SetBodyStream(x, -1)
			return false
		case cpython.CPathSend:
			x.pathSend(string(m.Data))
			return true
		case cpython.CDone:
			resp.Reset()
			if m.Flags&cpython.DoneQuiet != 0 { // a request the drain ended before it was answered
				resp.SetConnectionClose()
				resp.SetStatusCode(fasthttp.StatusServiceUnavailable)
				resp.SetBodyString("Service Unavailable\n")
				return true
			}
			method, path := x.describe()
			x.h.logError(method, path, string(m.Data))
			resp.SetStatusCode(fasthttp.StatusInternalServerError)
			resp.Header.SetContentType("text/plain; charset=utf-8")
			resp.SetBodyString(internalError)
			return true
		}
	}
}

func (x *fastExchange) describe() (string, string) {
	return string(x.ctx.Method()), string(x.ctx.Path())
}

// pathSend sends the file the application named as the body; the server
// copies it with sendfile where the connection allows.
func (x *fastExchange) pathSend(path string) {
	resp := &x.ctx.Response
	resp.Header.SetNoDefaultContentType(true)
	resp.SetStatusCode(x.status)
	eachHeader(x.head, resp.Header.AddBytesKV)
	f, err := os.Open(path)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		method, p := x.describe()
		x.h.logError(method, p, "asgi: http.response.pathsend: "+err.Error())
		resp.Reset()
		resp.SetStatusCode(fasthttp.StatusInternalServerError)
		resp.SetBodyString(internalError)
		return
	}
	if x.ctx.IsHead() || !bodyAllowed(x.status) {
		f.Close()
		resp.Header.SetContentLength(int(fi.Size()))
		resp.SkipBody = true
		return
	}
	resp.SetBodyStream(f, int(fi.Size())) // fasthttp closes f
}

// Read gives fasthttp the next part of a streamed body; it runs on the
// handler's goroutine after the handler returned.
func (x *fastExchange) Read(p []byte) (int, error) {
	for len(x.part) == 0 {
		if x.ended {
			return 0, x.endErr
		}
		if x.resume {
			// fasthttp is back for more: what came before is on the wire.
			x.resume = false
			x.r.Post(cpython.AResume, 0, nil)
		}
		m, _ := x.r.Next(context.Background())
		switch m.Kind {
		case cpython.CWant:
			x.feed()
		case cpython.CBody:
			x.part, x.resume = m.Data, m.Flags&cpython.FlagWait != 0
			if m.Flags&cpython.FlagMore == 0 {
				x.ended, x.endErr = true, io.EOF
			}
		case cpython.CDone:
			x.ended, x.endErr = true, io.EOF
			if m.Flags&cpython.DoneFailed != 0 {
				if m.Flags&cpython.DoneQuiet == 0 {
					method, path := x.describe()
					x.h.logError(method, path, string(m.Data))
				}
				x.endErr = errFailed // fasthttp ends the connection without the last chunk
			}
		}
	}
	n := copy(p, x.part)
	x.part = x.part[n:]
	if x.sent != nil {
		*x.sent += int64(n)
	}
	return n, nil
}

// CountInto has the bytes of a streamed body counted into n, for the
// access log and the metrics.
func (x *fastExchange) CountInto(n *int64) { x.sent = n }

// Close is fasthttp's word that the body is over, sent or not: a body the
// client left before its end tells the application it is gone.
func (x *fastExchange) Close() error {
	if !x.ended {
		x.r.Post(cpython.ADisconnect, 0, nil)
	}
	x.release()
	return nil
}

var _ io.ReadCloser = (*fastExchange)(nil)

// streamDirect writes a streamed body to the connection itself, part by
// part, each flushed as it comes: for a body of the length the application
// named (fasthttp would hold its parts back until its buffer fills), and
// for an HTTP/1.0 client, which cannot read chunks. The connection closes
// after the body, which ends it where no length is named. A body that does
// not match its length is cut there and logged.
func (x *fastExchange) streamDirect(length int64) {
	resp := &x.ctx.Response
	status := x.status
	resp.Reset()
	resp.SetStatusCode(status) // for the access log; fasthttp writes no response
	w := bufio.NewWriterSize(x.ctx.Conn(), 4096)
	noBody := x.ctx.IsHead() || !bodyAllowed(status)
	if noBody {
		length = -1
	}
	wire.WriteHead(w, x.ctx.Request.Header.IsHTTP11(), status, func(fn func(name, value []byte)) { eachHeader(x.head, fn) }, length)
	x.ctx.HijackSetNoResponse(true)
	x.ctx.Hijack(func(net.Conn) {})
	// What was sent, for the access log (m0.HijackedHead, m0.HijackedSent).
	x.ctx.SetUserValue("m0.head", time.Now())
	var sent int64
	defer func() { x.ctx.SetUserValue("m0.sent", sent) }()
	if w.Flush() != nil {
		x.r.Post(cpython.ADisconnect, 0, nil)
		x.ended = true
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := x.Read(buf)
		p := buf[:n]
		if length >= 0 && sent+int64(n) > length {
			p = p[:length-sent]
		}
		if len(p) > 0 && !noBody {
			w.Write(p)
			if w.Flush() != nil {
				x.r.Post(cpython.ADisconnect, 0, nil) // the client left
				x.ended = true
				return
			}
			sent += int64(len(p))
		}
		switch {
		case length >= 0 && len(p) < n && !noBody:
			x.lengthError(length, "longer")
			x.r.Post(cpython.ADisconnect, 0, nil) // what it sends next goes nowhere
			x.ended = true
			return
		case err == io.EOF && length >= 0 && sent < length && !noBody:
			x.lengthError(length, "shorter")
		}
		if err != nil {
			x.ended = true // whole or failed: the connection closes either way
			return
		}
	}
}

func (x *fastExchange) lengthError(length int64, how string) {
	method, path := x.describe()
	x.h.logError(method, path, "asgi: the response body is "+how+" than the Content-Length the application named ("+
		strconv.FormatInt(length, 10)+")")
}
