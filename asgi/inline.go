package asgi

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/strict"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"
)

// The inline front end (M0_INVERTED): the event loop's thread is the
// network's too. Go accepts on a goroutine, as it does for the default
// front end, and posts each connection's descriptor to the loop, which
// watches it; when it is readable the loop calls Go on its own thread
// (with the GIL), which reads and parses what came and, at the end of the
// loop's turn, starts every request read in it, back to back, with no
// queue and no wake-up. What the application sends comes back to Go by a
// call as well, which writes it. No goroutine waits on a connection, and a
// request crosses no thread.
//
// Only plain requests are served so: a request line and headers the
// strict reading passes (strict.CheckHead), HTTP/1.1 with an origin-form
// target, and the whole body (by Content-Length, up to inlineBody) in what
// was read. Anything else (Transfer-Encoding, Expect, Upgrade and so a
// WebSocket, a Connection header other than close or keep-alive, HTTP/1.0,
// a body over inlineBody or the cap, a head the strict reading refuses)
// hands the connection, with what it read, to the fasthttp front end
// (ServeInline's serve), which serves it from then on by the same rules
// as every other connection: one copy of each.

// inlineBody is the largest body a plain request carries: what the
// application receives in one message; a longer one is streamed to it in
// parts by the fasthttp front end.
const inlineBody = chunkSize

// inlineHead bounds a plain request's line and headers, as ReadBufferSize
// bounds fasthttp's.
const inlineHead = 16 << 10

// Inline is the inline front end of a Handler made with Options.Inline.
type Inline struct {
	h     *Handler
	ex    *cpython.Executor
	serve func(net.Conn) error // the fasthttp front end, for a connection handed off

	// Between the accepting goroutine and the loop's thread.
	mu      sync.Mutex
	adopted map[int]net.Conn // accepted, posted, not yet taken by the loop
	closed  chan struct{}    // closed once draining and no connection is left
	idle    time.Duration

	// The loop's thread's alone.
	conns    map[int]*iconn
	pend     []*ireq // read this turn, started at its end
	sched    bool
	draining bool
	sc       scope
	date     []byte
	dateAt   int64
}

type iconn struct {
	nc     net.Conn
	fd     int
	client netip.AddrPort
	server netip.AddrPort
	rbuf   []byte
	wbuf   []byte  // written in part: the rest waits for the descriptor to be writable
	q      []*ireq // in flight, in order of arrival
	eof    bool    // the client has closed its side
	last   bool    // close once what is in flight is written
	seen   time.Time
}

type ireq struct {
	c      *iconn
	r      *cpython.Request
	scope  []byte
	method string
	path   string
	head   bool
	status int
	hdr    []byte
	out    []byte // what is ready to write, once the requests before it are written
	sent   bool   // the head is out
	chunk  bool   // the body is chunked
	done   bool   // the response is whole
	broken bool   // the response ended short: the connection closes after it
	resume bool   // a send waits until out is written
}

func newInline(h *Handler) *Inline {
	return &Inline{h: h, adopted: map[int]net.Conn{}, conns: map[int]*iconn{}, closed: make(chan struct{})}
}

// ServeInline accepts connections on ln for the inline front end, handing
// one it does not serve to serve (a fasthttp server's ServeConn), until ln
// fails. Idle connections (no request in flight) close after idle; zero
// keeps them.
func (h *Handler) ServeInline(ln net.Listener, serve func(net.Conn) error, idle time.Duration) error {
	in := h.inline
	if in == nil {
		return errors.New("asgi: ServeInline needs a handler made with Options.Inline")
	}
	if h.startErr != nil {
		return h.startErr
	}
	in.serve, in.idle = serve, idle
	if idle > 0 {
		go in.tick(idle)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		fd := -1
		if sc, ok := c.(syscall.Conn); ok {
			if rc, err := sc.SyscallConn(); err == nil {
				rc.Control(func(d uintptr) { fd = int(d) })
			}
		}
		if fd < 0 { // not a socket the loop can watch
			go serve(c)
			continue
		}
		in.mu.Lock()
		in.adopted[fd] = c
		in.mu.Unlock()
		in.ex.Adopt(fd)
	}
}

// Shutdown drains the inline connections: each closes once what is in
// flight on it is written, an idle one at once; the next answer on a busy
// one says Connection: close. It returns when none is left, or ctx ends.
// The listener is the caller's to close first.
func (in *Inline) Shutdown(ctx context.Context) error {
	if in.ex == nil {
		return nil
	}
	in.ex.Adopt(drainFD)
	select {
	case <-in.closed:
		return nil
	case <-ctx.Done():
		return errors.New("asgi: inline connections still busy")
	}
}

// Descriptors the goroutines post that are not connections.
const (
	drainFD = -1
	tickFD  = -2
)

func (in *Inline) tick(every time.Duration) {
	t := time.NewTicker(min(every/2, time.Second))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			in.ex.Adopt(tickFD)
		case <-in.closed:
			return
		case <-in.ex.Ended():
			return
		}
	}
}

// Attach is given the executor before its loop starts.
func (in *Inline) Attach(e *cpython.Executor) { in.ex = e }

// Adopt takes a posted connection over (the loop's thread).
func (in *Inline) Adopt(fd int) {
	switch fd {
	case drainFD:
		in.draining = true
		for _, c := range in.conns {
			c.last = true
			if len(c.q) == 0 {
				in.close(c)
			}
		}
		in.drained()
		return
	case tickFD:
		now := time.Now()
		for _, c := range in.conns {
			if len(c.q) == 0 && len(c.wbuf) == 0 && now.Sub(c.seen) > in.idle {
				in.close(c)
			}
		}
		return
	}
	in.mu.Lock()
	nc := in.adopted[fd]
	delete(in.adopted, fd)
	in.mu.Unlock()
	if nc == nil {
		return
	}
	c := &iconn{nc: nc, fd: fd, client: wire.Peer(nc.RemoteAddr()), server: wire.Peer(nc.LocalAddr()), seen: time.Now()}
	if in.draining {
		nc.Close()
		return
	}
	if in.ex.Watch(fd, true, false) != nil {
		go in.serve(nc) // the loop would not watch it: the default front end serves it
		return
	}
	in.conns[fd] = c
}

func (in *Inline) drained() {
	if in.draining && len(in.conns) == 0 {
		select {
		case <-in.closed:
		default:
			close(in.closed)
		}
	}
}

// close lets go of c (the loop's thread).
func (in *Inline) close(c *iconn) {
	if in.conns[c.fd] != c {
		return
	}
	in.ex.Watch(c.fd, false, false)
	delete(in.conns, c.fd)
	for _, q := range c.q { // the client left with these in flight
		if !q.done {
			q.r.Post(cpython.ADisconnect, 0, nil)
		}
	}
	c.nc.Close()
	in.drained()
}

// handOff gives c, with what it read, to the fasthttp front end.
func (in *Inline) handOff(c *iconn) {
	in.ex.Watch(c.fd, false, false)
	delete(in.conns, c.fd)
	go in.serve(&readFirst{Conn: c.nc, first: c.rbuf})
	in.drained()
}

// readFirst is a connection whose first bytes were read already.
type readFirst struct {
	net.Conn
	first []byte
}

func (r *readFirst) Read(p []byte) (int, error) {
	if len(r.first) > 0 {
		n := copy(p, r.first)
		r.first = r.first[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}

// Readable reads what c has, and parses it (the loop's thread).
func (in *Inline) Readable(fd int) {
	c := in.conns[fd]
	if c == nil {
		return
	}
	c.seen = time.Now()
	for {
		if cap(c.rbuf)-len(c.rbuf) < 2048 {
			nb := make([]byte, len(c.rbuf), max(2*cap(c.rbuf), 4096))
			copy(nb, c.rbuf)
			c.rbuf = nb
		}
		n, err := unix.Read(fd, c.rbuf[len(c.rbuf):cap(c.rbuf)])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			break
		}
		if err != nil || n == 0 {
			c.eof = true
			break
		}
		c.rbuf = c.rbuf[:len(c.rbuf)+n]
		if len(c.rbuf) < cap(c.rbuf) {
			break // it had no more
		}
	}
	if c.eof {
		// A client that closed its side is gone: what it sent last is not
		// answered (as fasthttp), what is in flight hears it left.
		in.close(c)
		return
	}
	in.parse(c)
}

var crlf2 = []byte("\r\n\r\n")

// parse queues every plain request whole in c's buffer, or hands c off at
// the first that is not (the loop's thread).
func (in *Inline) parse(c *iconn) {
	off := 0
	for !c.last {
		buf := c.rbuf[off:]
		end := bytes.Index(buf, crlf2)
		if end < 0 {
			if len(buf) > inlineHead {
				off = in.handOffAt(c, off)
				return
			}
			break
		}
		q, n, ok := in.plain(c, buf[:end+4], buf[end+4:])
		if !ok {
			in.handOffAt(c, off)
			return
		}
		if q == nil {
			break // the body is not all in
		}
		off += n
		c.q = append(c.q, q)
		in.pend = append(in.pend, q)
	}
	c.rbuf = c.rbuf[:copy(c.rbuf, c.rbuf[off:])]
	if len(in.pend) > 0 && !in.sched && in.ex.Later() == nil {
		in.sched = true
	}
}

// handOffAt hands c off with its buffer from off, once what is in flight
// on it is answered: the fasthttp front end then owns the connection.
func (in *Inline) handOffAt(c *iconn, off int) int {
	c.rbuf = c.rbuf[:copy(c.rbuf, c.rbuf[off:])]
	if len(c.q) == 0 && len(c.wbuf) == 0 {
		in.handOff(c)
	} else {
		c.last = true // handed off once written (write)
		c.q = append(c.q, &ireq{c: c, done: true, method: handOffMark})
	}
	return 0
}

// handOffMark marks the place in a connection's queue where it is handed
// off.
const handOffMark = "\x00handoff"

// plain packs a request that the strict reading (strict.CheckHead, the
// rules every front end keeps) passes and that needs nothing but its
// whole body: ok false means the fasthttp front end is to read it; q nil
// with ok, that its body is not all in yet.
func (in *Inline) plain(c *iconn, head, rest []byte) (q *ireq, n int, ok bool) {
	if bytes.Count(head, []byte("\n")) != bytes.Count(head, []byte("\r\n")) {
		return nil, 0, false // a bare LF: the strict reading refuses it there
	}
	fr, rej := strict.CheckHead(head)
	if rej != nil || fr.Chunked || fr.Upgrade {
		return nil, 0, false
	}
	line, hdrs, _ := bytes.Cut(head[:len(head)-4], []byte("\r\n"))
	method, line, _ := bytes.Cut(line, []byte(" "))
	target, proto, _ := bytes.Cut(line, []byte(" "))
	if string(proto) != "HTTP/1.1" || len(target) == 0 || target[0] != '/' {
		return nil, 0, false // HTTP/1.0's keep-alive, an absolute or asterisk target
	}
	plain, closing := true, false
	rawHeaders(hdrs, func(name, value []byte) {
		switch {
		case wire.EqualFold(name, "Connection"):
			// close or keep-alive alone; any other list is the fasthttp
			// front end's to read.
			switch {
			case wire.EqualFold(value, "close"):
				closing = true
			case !wire.EqualFold(value, "keep-alive"):
				plain = false
			}
		case wire.EqualFold(name, "Expect"), wire.EqualFold(name, "Upgrade"):
			plain = false
		}
	})
	length := fr.Length
	if !plain || length > inlineBody || (in.h.maxBody >= 0 && length > in.h.maxBody) {
		return nil, 0, false
	}
	if int64(len(rest)) < length {
		return nil, 0, true
	}
	body := rest[:length]
	path, query, _ := bytes.Cut(target, []byte("?"))
	in.sc.begin(true, c.client, c.server)
	in.sc.str(method)
	in.sc.target(path, query)
	in.sc.addr(c.client)
	in.sc.addr(c.server)
	in.sc.string(in.h.rootPath)
	rawHeaders(hdrs, in.sc.header)
	q = &ireq{c: c, method: string(method), path: string(path), head: string(method) == http.MethodHead}
	q.scope = append([]byte(nil), in.sc.end(body)...)
	if closing {
		c.last = true // its answer is the connection's last
	}
	return q, len(head) + int(length), true
}

// Batch starts the requests read this turn, back to back, and writes what
// they answered at once (the loop's thread).
func (in *Inline) Batch() {
	in.sched = false
	for _, q := range in.pend {
		if in.conns[q.c.fd] != q.c { // its client left meanwhile
			continue
		}
		q.r = in.ex.StartNow(q.scope)
		q.r.Tag = q
		q.scope = nil
	}
	clear(in.pend)
	in.pend = in.pend[:0]
	in.Answers()
}

// Answers takes what the application sent and writes it (the loop's
// thread).
func (in *Inline) Answers() {
	var dirty []*iconn
	in.ex.TakeNow(func(r *cpython.Request, m cpython.Msg) {
		q, _ := r.Tag.(*ireq)
		if q == nil {
			return
		}
		if in.answer(q, m) {
			dirty = append(dirty, q.c)
		}
	})
	for _, c := range dirty {
		in.write(c)
	}
}

// answer applies one message of q's application; it reports whether
// there is something to write.
func (in *Inline) answer(q *ireq, m cpython.Msg) bool {
	switch m.Kind {
	case cpython.CStart:
		q.status, q.hdr = m.Flags, append(q.hdr[:0], m.Data...)
	case cpython.CBody:
		if q.done {
			return false
		}
		more := m.Flags&cpython.FlagMore != 0
		if !q.sent {
			measured := int64(-1)
			if !more {
				measured = int64(len(m.Data))
			}
			in.head(q, measured)
		}
		if !q.head && wire.BodyAllowed(q.status) && q.status != http.StatusNotModified {
			if q.chunk && len(m.Data) > 0 {
				q.out = strconv.AppendInt(q.out, int64(len(m.Data)), 16)
				q.out = append(q.out, "\r\n"...)
				q.out = append(q.out, m.Data...)
				q.out = append(q.out, "\r\n"...)
			} else if !q.chunk {
				q.out = append(q.out, m.Data...)
			}
		}
		if more && (q.head || !wire.BodyAllowed(q.status) || q.status == http.StatusNotModified) {
			// The head alone is the response: a stream hears that its
			// client is gone, as under the fasthttp front end.
			q.r.Post(cpython.ADisconnect, 0, nil)
			more = false
		}
		if !more {
			if q.chunk && !q.head {
				q.out = append(q.out, "0\r\n\r\n"...)
			}
			q.done = true
			q.r.Done()
		}
		q.resume = q.resume || m.Flags&cpython.FlagWait != 0
		return true
	case cpython.CPathSend:
		if q.done {
			return false
		}
		b, err := os.ReadFile(string(m.Data))
		if err != nil {
			in.h.logError(q.method, q.path, "asgi: http.response.pathsend: "+err.Error())
			in.refuse(q, http.StatusInternalServerError)
			return true
		}
		in.head(q, int64(len(b)))
		if !q.head {
			q.out = append(q.out, b...)
		}
		q.done = true
		q.r.Done()
		return true
	case cpython.CDone:
		if q.done {
			return false
		}
		switch {
		case q.sent: // the body ended short: what was sent goes, then the connection ends
			q.broken = true
			if m.Flags&cpython.DoneQuiet == 0 {
				in.h.logError(q.method, q.path, string(m.Data))
			}
		case m.Flags&cpython.DoneQuiet != 0:
			in.refuse(q, http.StatusServiceUnavailable)
			q.broken = true
		default:
			in.h.logError(q.method, q.path, string(m.Data))
			in.refuse(q, http.StatusInternalServerError)
		}
		q.done = true
		q.r.Done()
		return true
	}
	return false
}

// head renders q's status line and headers, with the body's framing:
// measured is the body's length when it is whole, -1 for a stream.
func (in *Inline) head(q *ireq, measured int64) {
	named := int64(-1)
	b := append(q.out, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(q.status), 10)
	b = append(b, ' ')
	b = append(b, fasthttp.StatusMessage(q.status)...)
	b = append(b, "\r\nDate: "...)
	b = append(b, in.now()...)
	b = append(b, "\r\n"...)
	named = eachHeader(q.hdr, func(name, value []byte) {
		b = append(b, name...)
		b = append(b, ": "...)
		b = append(b, value...)
		b = append(b, "\r\n"...)
	})
	length, _ := wire.Length(q.head, q.status, named, measured)
	switch {
	case length >= 0:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, length, 10)
		b = append(b, "\r\n"...)
	case wire.BodyAllowed(q.status) && !q.head:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
		q.chunk = true
	}
	if in.draining || q.c.last {
		b = append(b, "Connection: close\r\n"...)
	}
	q.out = append(b, "\r\n"...)
	q.sent = true
}

// refuse answers q with the server's own error.
func (in *Inline) refuse(q *ireq, status int) {
	q.status, q.hdr = status, nil
	body := wire.ErrorBody(status)
	q.hdr = appendPacked(q.hdr, "Content-Type", "text/plain; charset=utf-8")
	q.out = q.out[:0]
	q.sent = false
	in.head(q, int64(len(body)))
	if !q.head {
		q.out = append(q.out, body...)
	}
}

func appendPacked(b []byte, name, value string) []byte {
	b = append(b, byte(len(name)), byte(len(name)>>8), byte(len(name)>>16), byte(len(name)>>24))
	b = append(b, name...)
	b = append(b, byte(len(value)), byte(len(value)>>8), byte(len(value)>>16), byte(len(value)>>24))
	return append(b, value...)
}

// write sends what c's requests have ready, in order; what the socket
// does not take waits for it to be writable (the loop's thread).
func (in *Inline) write(c *iconn) {
	if in.conns[c.fd] != c {
		return
	}
	handOff := false
	for len(c.q) > 0 {
		q := c.q[0]
		if q.method == handOffMark {
			c.q = c.q[1:]
			handOff = true
			break
		}
		c.wbuf = append(c.wbuf, q.out...)
		q.out = q.out[:0]
		if !q.done {
			break
		}
		c.q[0] = nil
		c.q = c.q[1:]
		if q.broken {
			c.last = true
			c.q = nil
		}
	}
	for len(c.wbuf) > 0 {
		n, err := unix.Write(c.fd, c.wbuf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			in.ex.Watch(c.fd, !c.last, true)
			return
		}
		if err != nil {
			in.close(c)
			return
		}
		c.wbuf = c.wbuf[:copy(c.wbuf, c.wbuf[n:])]
	}
	in.ex.Watch(c.fd, true, false)
	for _, q := range c.q {
		if q.resume {
			q.resume = false
			q.r.Post(cpython.AResume, 0, nil)
		}
	}
	switch {
	case handOff:
		in.handOff(c)
	case c.last && len(c.q) == 0:
		in.close(c)
	case len(c.rbuf) > 0 && !c.last:
		in.parse(c) // pipelined requests held while writing
	}
}

// Writable writes what waited (the loop's thread).
func (in *Inline) Writable(fd int) {
	if c := in.conns[fd]; c != nil {
		in.write(c)
	}
}

// now is the Date header's value, made once a second.
func (in *Inline) now() []byte {
	t := time.Now()
	if s := t.Unix(); s != in.dateAt || in.date == nil {
		in.dateAt = s
		in.date = t.UTC().AppendFormat(in.date[:0], http.TimeFormat)
	}
	return in.date
}
