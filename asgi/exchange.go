package asgi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/wire"
)

// exchange is one HTTP request in the loop, whichever server parsed it: it
// reads what the application sends and decides what goes on the wire. The
// front ends (net/http, fasthttp) only render its decisions.
type exchange struct {
	h    *Handler
	r    *cpython.Request
	fe   frontEnd
	head bool // a HEAD request

	status int
	hdr    []byte      // the application's headers, packed
	length int64       // a streamed body's Content-Length, as the application named it; -1 none
	sent   int64       // the bytes of a streamed body handed on
	resume bool        // the application waits for the last part to be taken
	first  cpython.Msg // a stream's first part, which part returns first
	queued bool        // first is there
	ended  bool        // the stream is over, whole or not
	stop   func()      // ends the watch on the client, once one began
}

// frontEnd is what an exchange asks of the server that parsed the request.
type frontEnd interface {
	// feed hands the application the next chunk of the request body. It
	// returns the status to answer instead when the body cannot be had (413),
	// or -1 when the client is gone.
	feed(r *cpython.Request) int
	// watch notices the client leaving while the application waits on it
	// (an SSE stream with nothing to send, a long poll), posting a
	// disconnect; it returns what ends the watch, or nil where the server
	// tells of it anyway (net/http's request context).
	watch(r *cpython.Request) func()
	// describe names the request in log lines.
	describe() (method, path string)
}

// The kinds of reply.
const (
	whole  = iota // the status, the headers and the whole body
	stream        // the status, the headers and the body's first part; part gives the rest
	file          // the status, the headers and a file, sent with sendfile
	refuse        // the server answers status itself; 0: the client is gone, nothing is sent
)

// reply is what goes out before the body's parts: what both front ends
// send the same way.
type reply struct {
	kind   int
	status int
	hdr    []byte // the application's headers, packed (see eachHeader)
	length int64  // the Content-Length to send; -1 none
	body   []byte // whole: the body (a stream's parts come from part)
	noBody bool   // nothing goes out after the head: a HEAD, a 204, a 304
	file   *os.File
	close  bool // refuse: the connection closes after it
}

// reply waits for the application's response head and decides it. A
// failure before the head is a refusal: 500, logged, or 503 when the drain
// or the client ended the request; ctx ending (net/http's client leaving)
// is one with no answer.
func (x *exchange) reply(ctx context.Context) reply {
	rep := x.wait(ctx)
	// Only a stream goes on: the others need no word to the application
	// when they end.
	x.ended = rep.kind != stream
	return rep
}

func (x *exchange) wait(ctx context.Context) reply {
	for {
		m, err := x.r.Next(ctx)
		if err != nil {
			x.r.Post(cpython.ADisconnect, 0, nil)
			return reply{kind: refuse}
		}
		switch m.Kind {
		case cpython.CWant:
			if st := x.fe.feed(x.r); st != 0 {
				x.r.Post(cpython.ADisconnect, 0, nil)
				return reply{kind: refuse, status: max(st, 0), close: true}
			}
		case cpython.CIdle:
			x.watch()
		case cpython.CStart:
			x.status, x.hdr = m.Flags, m.Data
		case cpython.CBody:
			return x.decide(m)
		case cpython.CPathSend:
			return x.pathSend(string(m.Data))
		case cpython.CDone:
			if m.Flags&cpython.DoneQuiet != 0 { // the drain ended it, or the client left
				return reply{kind: refuse, status: http.StatusServiceUnavailable, close: true}
			}
			x.logError(string(m.Data))
			return reply{kind: refuse, status: http.StatusInternalServerError}
		}
	}
}

// decide makes the reply of a head and the body's first message.
func (x *exchange) decide(m cpython.Msg) reply {
	rep := reply{status: x.status, hdr: x.hdr}
	named := wire.AppLength(x.hdr)
	measured := int64(-1)
	if m.Flags&cpython.FlagMore != 0 {
		// A stream: the length the application named holds it to that many
		// bytes; without one, it is chunked (or, for HTTP/1.0, ends with the
		// connection).
		rep.kind = stream
		x.length, x.first, x.queued = named, m, true
	} else {
		rep.kind, rep.body = whole, m.Data
		measured = int64(len(m.Data))
	}
	var send bool
	rep.length, send = wire.Length(x.head, x.status, named, measured)
	rep.noBody = !send
	return rep
}

// pathSend makes the reply of http.response.pathsend: the file, opened
// here; one that cannot be opened is a 500.
func (x *exchange) pathSend(path string) reply {
	f, size, err := openPathSend(path)
	if err != nil {
		x.logError(err.Error())
		return reply{kind: refuse, status: http.StatusInternalServerError}
	}
	rep := reply{kind: file, status: x.status, hdr: x.hdr, file: f}
	var send bool
	rep.length, send = wire.Length(x.head, x.status, size, size) // the file's size, whatever the application named
	rep.noBody = !send
	if rep.noBody {
		f.Close()
		rep.file = nil
	}
	return rep
}

// openPathSend opens the file of an http.response.pathsend and gives its
// size, or the error to log (the answer is then a 500), for both front
// ends. The length sent is the file's, whatever the application named.
func openPathSend(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil {
			return f, fi.Size(), nil
		}
		f.Close()
	}
	return nil, 0, errors.New("asgi: http.response.pathsend: " + err.Error())
}

// part returns the next part of a streamed body to send: io.EOF at its
// end, errFailed when it ends short of that (logged, unless the drain or
// the client ended it). A body that goes past the length the application
// named is cut there and logged, and one that falls short is logged. ctx
// ending (net/http's client leaving) ends it as errGone.
func (x *exchange) part(ctx context.Context) ([]byte, error) {
	for !x.ended {
		if x.resume {
			// The front end is back for more: what came before is on the wire.
			x.resume = false
			x.r.Post(cpython.AResume, 0, nil)
		}
		var m cpython.Msg
		if x.queued {
			m, x.first, x.queued = x.first, cpython.Msg{}, false
		} else {
			var err error
			if m, err = x.r.Next(ctx); err != nil {
				x.gone()
				return nil, errGone
			}
		}
		switch m.Kind {
		case cpython.CWant:
			if x.fe.feed(x.r) != 0 {
				x.gone()
				return nil, errGone
			}
		case cpython.CIdle:
			x.watch()
		case cpython.CBody:
			x.resume = m.Flags&cpython.FlagWait != 0
			last := m.Flags&cpython.FlagMore == 0
			b, fault := clip(x.length, x.sent, m.Data, last)
			x.sent += int64(len(b))
			if fault != "" {
				x.logError(fault)
				if len(b) < len(m.Data) {
					x.gone() // cut: what it sends next goes nowhere
				} else {
					x.ended = true // short
				}
				return b, errCut
			}
			if last {
				x.ended = true
				if len(b) == 0 {
					return nil, io.EOF
				}
			}
			if len(b) > 0 {
				return b, nil
			}
		case cpython.CDone:
			x.ended = true
			if m.Flags&cpython.DoneFailed != 0 {
				if m.Flags&cpython.DoneQuiet == 0 {
					x.logError(string(m.Data))
				}
				return nil, errFailed
			}
		}
	}
	return nil, io.EOF
}

// clip holds a part b of a stream to the length the application named
// (length, -1 for none), sent bytes having gone before it, last whether it
// is the stream's end: what to send of it, and the error to log when the
// body goes past that length (it is cut there) or ends short of it; either
// way the connection ends after it. The one rule of both front ends.
func clip(length, sent int64, b []byte, last bool) ([]byte, string) {
	switch {
	case length < 0:
		return b, ""
	case sent+int64(len(b)) > length:
		return b[:length-sent], "asgi: the response body is longer than the Content-Length the application named (" +
			strconv.FormatInt(length, 10) + ")"
	case last && sent+int64(len(b)) < length:
		return b, "asgi: the response body is shorter than the Content-Length the application named (" +
			strconv.FormatInt(length, 10) + ")"
	}
	return b, ""
}

// gone tells the application its client has left: the stream is over.
func (x *exchange) gone() {
	if !x.ended {
		x.ended = true
		x.r.Post(cpython.ADisconnect, 0, nil)
	}
}

// watch starts the front end's watch on the client, once.
func (x *exchange) watch() {
	if x.stop == nil {
		if x.stop = x.fe.watch(x.r); x.stop == nil {
			x.stop = func() {}
		}
	}
}

// done ends the exchange: the watch, and the request on Go's side. A
// stream the front end stopped reading tells the application its client
// left.
func (x *exchange) done() {
	if x.stop != nil {
		x.stop()
	}
	x.gone()
	x.r.Done()
}

func (x *exchange) logError(msg string) {
	method, path := x.fe.describe()
	x.h.logError(method, path, msg)
}

var (
	// errFailed ends a body whose application failed after the response
	// started: the connection ends without the body's end.
	errFailed = errors.New("asgi: the application failed after the response started")
	// errCut ends a body that did not match the length the application
	// named: the connection closes after what was sent.
	errCut = errors.New("asgi: the response body does not match its Content-Length")
	// errGone ends a body whose client left.
	errGone = errors.New("asgi: the client left")
)
