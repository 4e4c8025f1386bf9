package wsgi

import (
	"bufio"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/valyala/fasthttp"
)

// ServeFastHTTP serves a request that fasthttp parsed: the same bridge as
// ServeHTTP without net/http's costs per request. m0serve's own listener
// uses it.
func (h *handler) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	x := fastExchanges.Get().(*fastExchange)
	x.ctx = ctx
	x.body = ctx.PostBody()
	switch {
	case h.maxBody >= 0 && int64(len(x.body)) > h.maxBody:
		ctx.Error("Request Entity Too Large", fasthttp.StatusRequestEntityTooLarge)
	case !fastEnviron(&x.env, ctx, len(x.body), &x.scratch):
		ctx.Error("Bad Request", fasthttp.StatusBadRequest)
	case !h.pool.submit(ctx, &x.job):
		ctx.Error("Service Unavailable", fasthttp.StatusServiceUnavailable)
	default:
		<-x.done
		if x.conn != nil {
			// A streamed body: the Python thread writes it on the raw
			// connection, which closes when the body ends; the exchange is
			// the thread's until then, and it releases it.
			conn, ended := x.conn, x.ended
			ctx.HijackSetNoResponse(true)
			ctx.Hijack(func(c net.Conn) {
				conn <- c
				<-ended
			})
			return
		}
	}
	x.release()
}

// fastExchange is a request that fasthttp parsed.
type fastExchange struct {
	job
	ctx     *fasthttp.RequestCtx
	scratch []byte
	// method and path outlive ctx for a streamed body's log lines.
	method, path string
	// For a streamed body: the hijacked connection, and its end.
	conn  chan net.Conn
	ended chan struct{}
}

var fastExchanges = sync.Pool{New: func() any {
	x := &fastExchange{}
	x.done = make(chan struct{}, 1)
	x.x = x
	return x
}}

func (x *fastExchange) release() {
	x.ctx, x.body, x.conn, x.ended, x.method, x.path = nil, nil, nil, nil, "", ""
	if cap(x.env.B) > keep {
		x.env.B = nil
	}
	fastExchanges.Put(x)
}

func (x *fastExchange) describe() (string, string) {
	if x.ctx == nil {
		return x.method, x.path
	}
	return string(x.ctx.Method()), string(x.ctx.Path())
}

func (x *fastExchange) fail() {
	x.ctx.Response.Reset()
	x.ctx.SetStatusCode(fasthttp.StatusInternalServerError)
	x.ctx.SetContentType("text/plain; charset=utf-8")
	x.ctx.SetBodyString(internalError)
	x.done <- struct{}{}
}

func (x *fastExchange) respond(t *cpython.Thread, status int, body []byte) {
	resp := &x.ctx.Response
	resp.Header.SetNoDefaultContentType(true)
	resp.SetStatusCode(status)
	appLength := eachHeader(t, resp.Header.AddBytesKV)
	switch {
	case !bodyAllowed(status):
	case x.ctx.IsHead() && appLength >= 0:
		// The application's length is that of the GET; no body is sent.
		resp.SkipBody = true
		resp.Header.SetContentLength(int(appLength))
	default:
		resp.SetBody(body)
	}
	x.done <- struct{}{}
}

// stream hands the connection to the Python thread: the handler hijacks it
// and the thread writes the head and the body there.
func (x *fastExchange) stream(t *cpython.Thread, status int) streamer {
	conn, ended := make(chan net.Conn, 1), make(chan struct{})
	x.conn, x.ended = conn, ended
	chunked := x.ctx.Request.Header.IsHTTP11()
	x.method, x.path = x.describe()
	x.ctx = nil // the handler returns to hijack the connection
	x.done <- struct{}{}
	c := <-conn
	s := &fastStreamer{x: x, c: c, ended: ended, chunked: chunked}
	s.w = bufio.NewWriterSize(c, 4096)
	proto := "HTTP/1.1 "
	if !chunked {
		proto = "HTTP/1.0 "
	}
	s.w.WriteString(proto)
	s.w.WriteString(strconv.Itoa(status))
	s.w.WriteByte(' ')
	s.w.WriteString(fasthttp.StatusMessage(status))
	s.w.WriteString("\r\n")
	eachHeader(t, func(name, value []byte) {
		s.w.Write(name)
		s.w.WriteString(": ")
		s.w.Write(value)
		s.w.WriteString("\r\n")
	})
	s.w.WriteString("Date: ")
	s.w.WriteString(time.Now().UTC().Format(http1Date))
	s.w.WriteString("\r\nConnection: close\r\n")
	if chunked {
		s.w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	s.w.WriteString("\r\n")
	return s
}

const http1Date = "Mon, 02 Jan 2006 15:04:05 GMT"

type fastStreamer struct {
	x       *fastExchange
	c       net.Conn
	w       *bufio.Writer
	ended   chan struct{}
	chunked bool
}

func (s *fastStreamer) write(b []byte) error {
	if len(b) > 0 {
		if s.chunked {
			s.w.WriteString(strconv.FormatInt(int64(len(b)), 16))
			s.w.WriteString("\r\n")
			s.w.Write(b)
			s.w.WriteString("\r\n")
		} else {
			s.w.Write(b)
		}
	}
	return s.w.Flush()
}

func (s *fastStreamer) end(ok bool) {
	if ok {
		if s.chunked {
			s.w.WriteString("0\r\n\r\n")
		}
		s.w.Flush()
	}
	close(s.ended) // the connection closes without a terminator when !ok
	s.x.release()
}
