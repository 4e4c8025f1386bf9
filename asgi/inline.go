package asgi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/front"
	"github.com/m0serve/m0/internal/sock"
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
// as every other connection: one copy of each. So does every connection
// while InlineOptions.Shed says the loop is the pace, with what it sends
// next, a new one at its accept.

// inlineBody is the largest body a plain request carries: what the
// application receives in one message; a longer one is streamed to it in
// parts by the fasthttp front end.
const inlineBody = chunkSize

// inlineHead bounds a plain request's line and headers, as ReadBufferSize
// bounds fasthttp's.
const inlineHead = 16 << 10

// readCap bounds what a connection to be handed off holds read: the rest
// stays in the socket for the fasthttp front end.
const readCap = inlineHead + inlineBody

// InlineOptions configure ServeInline.
type InlineOptions struct {
	// Idle closes a connection with no request in flight that has not
	// completed one for this long (m0serve's --idle-timeout); zero never.
	Idle time.Duration
	// MaxRequests closes a connection once it has been answered this many
	// requests (--max-keepalive-requests); zero never.
	MaxRequests int
	// Claimed reports whether the server answers a path itself (a static
	// directory, a health check), given as sent and decoded: its request
	// is handed off, to the handler that does.
	Claimed func(raw, decoded string) bool
	// Served is called for each request served inline (--max-requests
	// counts them).
	Served func()
	// Shed reports whether the loop is the pace of the process, with other
	// CPUs free beside it: a new connection then goes to the fasthttp
	// front end (serve) at once, and a kept-alive one with what it sends
	// next (once what is in flight on it is answered), so that Go's
	// threads read and write beside the loop's Python, as under the
	// default front end. A connection handed off stays there. nil: never.
	Shed func() bool
}

// Inline is the inline front end of a Handler made with Options.Inline.
type Inline struct {
	h     *Handler
	ex    *cpython.Executor
	serve func(net.Conn) error // the fasthttp front end, for a connection handed off
	opts  InlineOptions

	// Read by InlineRequesting, on any goroutine: the connections that
	// began a request since its last reading (each counted once, by its
	// look).
	requesting atomic.Int64
	look       atomic.Uint32

	// Between the accepting goroutine and the loop's thread.
	mu      sync.Mutex
	adopted map[int]accepted // accepted, posted, not yet taken by the loop
	closed  chan struct{}    // closed once draining and no connection is left

	// The loop's thread's alone.
	conns    map[int]*iconn
	pend     []*ireq  // read, to start in order at a turn's end (Batch)
	dirty    []*iconn // with answers to write, in Answers
	sched    bool
	draining bool
	sc       scope
	decoded  []byte // a path decoded for Claimed
	date     []byte
	dateAt   int64
}

// accepted is a connection ServeInline posted to the loop: its peers. The
// loop owns its descriptor, a duplicate of the one Go's poller watched,
// whose connection is closed: were Go's poller still watching the socket,
// every request's arrival would wake the thread waiting in it for
// nothing.
type accepted struct{ client, server netip.AddrPort }

type iconn struct {
	fd       int // the loop's own: closed with the connection, or handed off in a net.Conn of its own
	client   netip.AddrPort
	server   netip.AddrPort
	rbuf     []byte
	wbuf     []byte    // written in part: the rest waits for the descriptor to be writable
	q        []*ireq   // in flight, in order of arrival
	eof      bool      // the client has closed its side: nothing more is read
	last     bool      // no request after those in q is answered; close once they are written
	handOff  bool      // with last: hand the connection off, with rbuf, once q is written
	writing  bool      // a write waits for the socket (wbuf, or a file)
	seen     time.Time // accepted, or a request answered: an idle connection's age
	progress time.Time // the last write that sent something: a client that stops reading
	served   int       // requests read
	look     uint32    // Inline.look when it last began a request (InlineRequesting)
	watched  int       // what the loop watches the descriptor for (watch)
}

type ireq struct {
	c                 *iconn
	r                 *cpython.Request
	scope             []byte
	method            string
	path              string
	head              bool
	status            int
	hdr               []byte
	out               []byte   // what is ready to write, once the requests before it are written
	sent              bool     // the head is out
	chunk             bool     // the body is chunked
	done              bool     // the response is whole
	broken            bool     // the response ended short: the connection closes after it
	resume            bool     // a send waits until out is written
	last              bool     // the connection's last answer
	dropped           bool     // after its connection's last answer: never started
	idle              bool     // the application waits in receive() for the client's leaving
	file              *os.File // pathsend's file, sent with sendfile once out is written
	fileOff, fileLeft int64
	length            int64 // the length the head names, -1 for none (clip)
	body              int64 // the body's bytes sent so far
}

func newInline(h *Handler) *Inline {
	in := &Inline{h: h, adopted: map[int]accepted{}, conns: map[int]*iconn{}, closed: make(chan struct{})}
	in.look.Store(1) // a new connection's look is 0: its first request counts
	return in
}

// InlineRequesting is how many of the inline front end's connections
// began a request since the last call (the first: since the front end
// started), not counting those handed off, which their server counts; 0
// without Options.Inline. One goroutine reads it.
func (h *Handler) InlineRequesting() int {
	in := h.inline
	if in == nil {
		return 0
	}
	n := in.requesting.Swap(0)
	in.look.Add(1)
	return int(n)
}

// ServeInline accepts connections on ln for the inline front end, handing
// one it does not serve to serve (a fasthttp server's ServeConn, or what
// feeds one), until ln fails. ln's connections must be sockets
// (syscall.Conn); one that is not is handed to serve at once.
func (h *Handler) ServeInline(ln net.Listener, serve func(net.Conn) error, opts InlineOptions) error {
	in := h.inline
	if in == nil {
		return errors.New("asgi: ServeInline needs a handler made with Options.Inline")
	}
	if h.startErr != nil {
		return h.startErr
	}
	in.serve, in.opts = serve, opts
	if opts.Idle > 0 {
		go in.tick(opts.Idle)
	}
	var accept sock.AcceptRetry // a failure to accept (out of descriptors) is retried, as every listener here
	for {
		c, err := accept.Accept(ln, nil)
		if err != nil {
			return err // ln is closed
		}
		if opts.Shed != nil && opts.Shed() {
			go serve(c) // the loop is the pace: the fasthttp front end serves it
			continue
		}
		fd := -1
		if sc, ok := c.(syscall.Conn); ok {
			if rc, err := sc.SyscallConn(); err == nil {
				rc.Control(func(d uintptr) {
					if n, err := unix.FcntlInt(d, unix.F_DUPFD_CLOEXEC, 0); err == nil {
						fd = n
					}
				})
			}
		}
		if fd < 0 { // not a socket the loop can watch
			go serve(c)
			continue
		}
		a := accepted{client: wire.Peer(c.RemoteAddr()), server: wire.Peer(c.LocalAddr())}
		c.Close() // out of Go's poller; the socket lives on in fd
		in.mu.Lock()
		in.adopted[fd] = a
		in.mu.Unlock()
		in.ex.Adopt(fd)
	}
}

// ShutdownInline drains the inline front end's connections: each closes
// once what is in flight on it is written, an idle one at once; the next
// answer on a busy one says Connection: close. It returns when none is
// left, or ctx ends. The listener is the caller's to close first; the
// handler's own drain (Drain, Shutdown) is apart from this one.
func (h *Handler) ShutdownInline(ctx context.Context) error {
	in := h.inline
	if in == nil || in.ex == nil {
		return nil
	}
	// As the fasthttp front end's drain: connections that carry no request
	// close once quiet for their grace, looked at again every tick.
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		in.ex.Adopt(drainFD)
		select {
		case <-in.closed:
			return nil
		case <-in.ex.Ended():
			return nil // the loop has stopped: nothing is served inline any more
		case <-ctx.Done():
			return errors.New("asgi: inline connections still busy")
		case <-tick.C:
		}
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
		// The answers from now on say Connection: close (head); a
		// connection that carries no request closes once quiet for
		// front.UnusedGrace (none sent yet) or front.KeptGrace (kept
		// alive), as under the fasthttp front end.
		in.draining = true
		now := time.Now()
		for _, c := range in.conns {
			grace := front.KeptGrace
			if c.served == 0 {
				grace = front.UnusedGrace
			}
			if in.quiet(c) && now.Sub(c.seen) > grace {
				in.close(c)
			}
		}
		in.drained()
		return
	case tickFD:
		now := time.Now()
		for _, c := range in.conns {
			if in.quiet(c) && now.Sub(c.seen) > in.opts.Idle ||
				c.writing && now.Sub(c.progress) > in.opts.Idle { // a client that stopped reading
				in.close(c)
			}
		}
		return
	}
	in.mu.Lock()
	a, ok := in.adopted[fd]
	delete(in.adopted, fd)
	in.mu.Unlock()
	if !ok {
		return
	}
	c := &iconn{fd: fd, client: a.client, server: a.server, seen: time.Now()}
	if in.draining {
		unix.Close(fd)
		return
	}
	if in.ex.Watch(fd, true, false) != nil {
		in.give(fd, nil) // the loop would not watch it: the default front end serves it
		return
	}
	c.watched = 1
	in.conns[fd] = c
}

// quiet reports whether c carries no request: none in flight, nothing to
// write, nothing read.
func (in *Inline) quiet(c *iconn) bool {
	return len(c.q) == 0 && len(c.wbuf) == 0 && len(c.rbuf) == 0 && !c.writing
}

// watch has the loop watch c's descriptor for what c waits for: writing
// while a write waits, reading while it can take more (not once the client
// closed its side, nor while a write waits, nor past readCap).
func (in *Inline) watch(c *iconn) {
	if in.conns[c.fd] != c {
		return // closed, or handed off: the descriptor is no longer the loop's
	}
	want := 0
	if !c.eof && !c.writing && len(c.rbuf) < readCap {
		want |= 1
	}
	if c.writing {
		want |= 2
	}
	if want != c.watched {
		c.watched = want
		in.ex.Watch(c.fd, want&1 != 0, want&2 != 0)
	}
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
		if q.file != nil {
			q.file.Close()
		}
		if !q.done && q.r != nil {
			q.r.Post(cpython.ADisconnect, 0, nil)
		}
	}
	unix.Close(c.fd)
	in.drained()
}

// handOff gives c, with what it read, to the fasthttp front end.
func (in *Inline) handOff(c *iconn) {
	in.ex.Watch(c.fd, false, false)
	delete(in.conns, c.fd)
	in.give(c.fd, c.rbuf)
	// Nothing more of c is the loop's: its bytes are the handed
	// connection's to read.
	c.last, c.handOff, c.rbuf = true, false, nil
	in.drained()
}

// give hands the connection of the loop's descriptor fd, with what was
// read from it first, to the fasthttp front end: in a net.Conn of its
// own (a duplicate, in Go's poller), fd closed.
func (in *Inline) give(fd int, first []byte) {
	f := os.NewFile(uintptr(fd), "inline")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return // out of descriptors: the client sees its connection close
	}
	// Read and written with raw system calls, as the listener's own
	// connections are (strict's listener makes RawIO only of a bare
	// TCPConn, which readFirst is not): Go's own calls enter the runtime's
	// syscall state each time, and cost the shed a tenth of its rate
	// (Starlette, 64 connections, measured).
	rf := &readFirst{Conn: sock.NewRawIO(nc), first: first}
	rf.held.Store(len(first) > 0)
	go in.serve(rf)
}

// readFirst is a connection whose first bytes were read already.
type readFirst struct {
	net.Conn
	first []byte
	held  atomic.Bool // first is not all read: Held, from any goroutine
}

// Held reports whether bytes the inline front end read are still to be
// read (sock.Pending).
func (r *readFirst) Held() bool { return r.held.Load() }

// SyscallConn, CloseWrite and ReadFrom are the socket's, as the listener's
// wrappers above expect of a connection (sock.WatchClose, the linger after
// a 413, sendfile).
func (r *readFirst) SyscallConn() (syscall.RawConn, error) { return sock.RawConn(r.Conn) }

func (r *readFirst) CloseWrite() error { return sock.CloseWrite(r.Conn) }

func (r *readFirst) ReadFrom(src io.Reader) (int64, error) { return sock.ReadFrom(r.Conn, src) }

// NetConn is the connection under r, for sock.Find.
func (r *readFirst) NetConn() net.Conn { return r.Conn }

func (r *readFirst) Read(p []byte) (int, error) {
	if len(r.first) > 0 {
		n := copy(p, r.first)
		r.first = r.first[n:]
		r.held.Store(len(r.first) > 0)
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
	switch {
	case c.eof && len(c.q) == 0 && !c.handOff:
		in.close(c)
		return
	case c.eof:
		// The client closed its side: what the application answers still
		// goes out, and a request that waits in receive() hears it left
		// (idle), as under the fasthttp front end's watch.
		c.last = true
		for _, q := range c.q {
			if q.idle && !q.done {
				q.r.Post(cpython.ADisconnect, 0, nil)
			}
		}
	case c.last && !c.handOff:
		c.rbuf = c.rbuf[:0] // after the connection's last request: not read on
	default:
		in.parse(c)
	}
	in.watch(c)
}

var crlf2 = []byte("\r\n\r\n")

// bareLF reports whether b has an LF that no CR comes before.
func bareLF(b []byte) bool {
	for i := bytes.IndexByte(b, '\n'); i >= 0; {
		if i == 0 || b[i-1] != '\r' {
			return true
		}
		j := bytes.IndexByte(b[i+1:], '\n')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// parse queues every plain request whole in c's buffer, or hands c off at
// the first that is not (the loop's thread).
func (in *Inline) parse(c *iconn) {
	if in.opts.Shed != nil && !in.draining && in.opts.Shed() {
		// The loop is the pace: Go's threads serve this connection from
		// what it sent now on, once what is in flight on it is answered
		// (not while draining, when the handed connections' server may
		// have stopped taking them).
		in.handOffAt(c, 0)
		return
	}
	off, handed := 0, false
	for !c.last {
		buf := c.rbuf[off:]
		end := bytes.Index(buf, crlf2)
		head := buf
		if end >= 0 {
			head = buf[:end+4]
		}
		if bareLF(head) || len(head) > inlineHead {
			// A line the strict reading takes another way, or a head over
			// its bound: the fasthttp front end's to answer.
			in.handOffAt(c, off)
			handed = true
			break
		}
		if end < 0 {
			break
		}
		q, n, ok := in.plain(c, head, buf[end+4:])
		if !ok || q == nil {
			// Not plain, or a body not all in what was read: the fasthttp
			// front end streams it, within --body-timeout.
			in.handOffAt(c, off)
			handed = true
			break
		}
		off += n
		c.q = append(c.q, q)
		in.pend = append(in.pend, q)
	}
	if !handed {
		c.rbuf = c.rbuf[:copy(c.rbuf, c.rbuf[off:])]
	}
	if len(in.pend) > 0 && !in.sched && in.ex.Later() == nil {
		in.sched = true
	}
}

// handOffAt hands c off with its buffer from off, once what is in flight
// on it is answered: the fasthttp front end then owns the connection.
func (in *Inline) handOffAt(c *iconn, off int) {
	c.rbuf = c.rbuf[:copy(c.rbuf, c.rbuf[off:])]
	if len(c.q) == 0 && len(c.wbuf) == 0 && !c.writing {
		in.handOff(c)
	} else {
		c.last, c.handOff = true, true // handed off once written (write)
	}
}

// plain packs a request that the strict reading (strict.CheckHead, the
// rules every front end keeps) passes and that needs nothing but its
// whole body: ok false means the fasthttp front end is to read it; q nil
// with ok, that its body is not all in yet.
func (in *Inline) plain(c *iconn, head, rest []byte) (q *ireq, n int, ok bool) {
	fr, rej := strict.CheckHead(head)
	if rej != nil || fr.Chunked || fr.Upgrade {
		return nil, 0, false
	}
	line, hdrs, _ := bytes.Cut(head[:len(head)-4], []byte("\r\n"))
	method, line, _ := bytes.Cut(line, []byte(" "))
	target, proto, _ := bytes.Cut(line, []byte(" "))
	if string(proto) != "HTTP/1.1" || len(target) == 0 || target[0] != '/' || bytes.IndexByte(target, '#') >= 0 {
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
	path, query, _ := bytes.Cut(target, []byte("?"))
	if in.opts.Claimed != nil {
		// Decoded, as the server's own handlers match it.
		in.decoded, _ = wire.Unescape(in.decoded[:0], path, true)
		if in.opts.Claimed(string(path), string(in.decoded)) {
			return nil, 0, false // the server answers it, in front of the application
		}
	}
	body := rest[:length]
	in.sc.begin(true, c.client, c.server)
	in.sc.str(method)
	in.sc.target(path, query)
	in.sc.addr(c.client)
	in.sc.addr(c.server)
	in.sc.string(in.h.rootPath)
	rawHeaders(hdrs, in.sc.header)
	q = &ireq{c: c, method: string(method), path: string(path), head: string(method) == http.MethodHead}
	q.scope = append([]byte(nil), in.sc.end(body)...)
	c.served++
	if l := in.look.Load(); c.look != l {
		c.look = l
		in.requesting.Add(1)
	}
	if closing || (in.opts.MaxRequests > 0 && c.served >= in.opts.MaxRequests) {
		c.last, q.last = true, true // its answer is the connection's last
	}
	return q, len(head) + int(length), true
}

// Batch starts the requests read this turn, back to back, and writes what
// they answered at once (the loop's thread). Where tasks start lazily
// (before 3.12) it starts cpython.LazyStarts at most: the rest stay in
// pend, in order, for a Batch a turn later, after the first steps of
// those started (or at once, if the loop refuses the callback).
func (in *Inline) Batch() {
	in.sched = false
	// What a call inside a start parses is the next batch's.
	n := len(in.pend)
	bound := cpython.LazyStarts
	if in.ex.Eager {
		bound = n
	}
	done := in.start(in.pend[:n], bound)
	if done < n {
		if in.sched || in.ex.Later() == nil {
			in.sched = true
		} else {
			done += in.start(in.pend[done:n], n) // the loop refused the callback: the rest now
		}
	}
	rest := copy(in.pend, in.pend[done:])
	clear(in.pend[rest:])
	in.pend = in.pend[:rest]
	in.Answers()
}

// start starts the first bound requests of batch that are still to be
// answered, and reports how many of batch it went through.
func (in *Inline) start(batch []*ireq, bound int) int {
	// After the connection's last answer, or its client left.
	skip := func(q *ireq) bool {
		return q.dropped || in.conns[q.c.fd] != q.c
	}
	n := len(batch)
	if bound < n {
		started := 0
		for i, q := range batch {
			if skip(q) {
				continue
			}
			if started == bound {
				n = i
				break
			}
			started++
		}
	}
	last := -1
	for i := n - 1; i >= 0 && last < 0; i-- {
		if !skip(batch[i]) {
			last = i
		}
	}
	for i, q := range batch[:n] {
		if skip(q) {
			continue
		}
		q.r = in.ex.StartNow(q.scope, q, i == last)
		q.scope = nil
		if in.opts.Served != nil {
			in.opts.Served()
		}
	}
	return n
}

// Answers takes what the application sent and writes it (the loop's
// thread).
func (in *Inline) Answers() {
	in.ex.TakeNow(in.take)
	for i, c := range in.dirty {
		in.write(c)
		in.dirty[i] = nil
	}
	in.dirty = in.dirty[:0]
}

// take is TakeNow's: the connections with something to write are dirty.
func (in *Inline) take(r *cpython.Request, m cpython.Msg) {
	q, _ := r.Tag.(*ireq)
	if q != nil && q.r == nil {
		q.r = r // taken inside its StartNow (the batch's last, alone)
	}
	if q != nil && in.answer(q, m) {
		if n := len(in.dirty); n == 0 || in.dirty[n-1] != q.c {
			in.dirty = append(in.dirty, q.c)
		}
	}
}

// answer applies one message of q's application; it reports whether
// there is something to write.
func (in *Inline) answer(q *ireq, m cpython.Msg) bool {
	switch m.Kind {
	case cpython.CStart:
		q.status, q.hdr = m.Flags, append(q.hdr[:0], m.Data...)
	case cpython.CIdle:
		// It waits in receive() for what follows its body: the client's
		// leaving, already seen or to come (Readable).
		q.idle = true
		if q.c.eof && !q.done {
			q.r.Post(cpython.ADisconnect, 0, nil)
		}
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
			in.head(q, -1, measured)
		}
		if !q.head && wire.BodyAllowed(q.status) && q.status != http.StatusNotModified {
			b, fault := clip(q.length, q.body, m.Data, !more)
			q.body += int64(len(b))
			if q.chunk && len(b) > 0 {
				q.out = strconv.AppendInt(q.out, int64(len(b)), 16)
				q.out = append(q.out, "\r\n"...)
				q.out = append(q.out, b...)
				q.out = append(q.out, "\r\n"...)
			} else if !q.chunk {
				q.out = append(q.out, b...)
			}
			if fault != "" { // the connection ends after what was sent
				in.h.logError(q.method, q.path, fault)
				if more {
					q.r.Post(cpython.ADisconnect, 0, nil)
				}
				q.broken, q.done = true, true
				q.r.Done()
				return true
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
		if in.conns[q.c.fd] == q.c { // its client is still there
			f, size, err := openPathSend(string(m.Data))
			switch {
			case err != nil:
				in.h.logError(q.method, q.path, err.Error())
				in.refuse(q, http.StatusInternalServerError)
			case in.head(q, size, size) && size > 0:
				q.file, q.fileLeft = f, size
			default:
				f.Close()
			}
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
// measured is the body's length when it is whole, -1 for a stream; named,
// the length the application named, or -1 to read it from its headers. It
// reports whether a body goes after the head (wire.Length).
func (in *Inline) head(q *ireq, named, measured int64) (body bool) {
	if named < 0 {
		named = wire.AppLength(q.hdr)
	}
	length, body := wire.Length(q.head, q.status, named, measured)
	q.length = -1
	if measured < 0 {
		q.length = length // a stream is held to the length named
		// One of a length named ends its connection, as under fasthttp.
		q.last = q.last || length >= 0 && body
	}
	appCloses := closes(q.hdr)
	q.last = q.last || in.draining || appCloses
	if q.last {
		q.c.last = true // no request after this one is answered (gather)
	}
	b := append(q.out, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(q.status), 10)
	b = append(b, ' ')
	b = append(b, fasthttp.StatusMessage(q.status)...)
	b = append(b, "\r\nDate: "...)
	b = append(b, in.now()...)
	b = append(b, "\r\n"...)
	eachHeader(q.hdr, func(name, value []byte) {
		if wire.EqualFold(name, "Date") || q.last && !appCloses && wire.EqualFold(name, "Connection") {
			return // the server's, as under fasthttp
		}
		b = append(b, name...)
		b = append(b, ": "...)
		b = append(b, value...)
		b = append(b, "\r\n"...)
	})
	switch {
	case length >= 0:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, length, 10)
		b = append(b, "\r\n"...)
	case body:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
		q.chunk = true
	}
	if q.last && !appCloses {
		b = append(b, "Connection: close\r\n"...)
	}
	q.out = append(b, "\r\n"...)
	q.sent = true
	return body
}

// closes reports whether a packed head says Connection: close.
func closes(hdr []byte) bool {
	found := false
	wire.EachPacked(hdr, func(name, value []byte) {
		found = found || wire.EqualFold(name, "Connection") && bytes.Contains(bytes.ToLower(value), []byte("close"))
	})
	return found
}

// refuse answers q with the server's own error.
func (in *Inline) refuse(q *ireq, status int) {
	q.status, q.hdr = status, q.hdr[:0]
	body := wire.ErrorBody(status)
	wire.AnswerHeaders(status, func(name, value string) { q.hdr = appendPacked(q.hdr, name, value) })
	q.out = q.out[:0]
	q.sent = false
	in.head(q, -1, int64(len(body)))
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
	for in.conns[c.fd] == c {
		in.gather(c)
		if !in.flush(c) {
			return
		}
		if len(c.q) > 0 && c.q[0].file != nil && c.q[0].done {
			if !in.sendFile(c, c.q[0]) {
				return
			}
			continue // the file is out: the requests after it are next
		}
		c.writing = false
		if len(c.q) > 0 && c.q[0].resume { // what it sent is out: its waiting send returns
			c.q[0].resume = false
			c.q[0].r.Post(cpython.AResume, 0, nil)
		}
		switch {
		case c.last && len(c.q) == 0 && c.handOff:
			in.handOff(c)
		case c.last && len(c.q) == 0:
			in.close(c)
		default:
			if len(c.rbuf) > 0 && !c.last {
				in.parse(c) // pipelined requests held while writing
			}
			in.watch(c)
		}
		return
	}
}

// gather moves what c's requests have ready into its buffer, in order,
// and lets go of those answered whole, up to a file still to send.
func (in *Inline) gather(c *iconn) {
	for len(c.q) > 0 {
		q := c.q[0]
		c.wbuf = append(c.wbuf, q.out...)
		q.out = q.out[:0]
		if !q.done || q.file != nil {
			return
		}
		c.q[0] = nil
		c.q = c.q[1:]
		c.seen = time.Now()
		if q.broken || q.last { // the connection ends after it: what came after it is not answered
			c.last, c.handOff = true, false
			for _, later := range c.q {
				later.dropped = true
				if !later.done && later.r != nil {
					later.r.Post(cpython.ADisconnect, 0, nil)
				}
			}
			c.q = nil
		}
	}
}

// flush writes c's buffer; false when the socket is full (c is then
// watched for writing, and not read meanwhile) or failed (c is closed).
func (in *Inline) flush(c *iconn) bool {
	for len(c.wbuf) > 0 {
		n, err := unix.Write(c.fd, c.wbuf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			in.wait(c)
			return false
		}
		if err != nil {
			in.close(c)
			return false
		}
		c.wbuf = c.wbuf[:copy(c.wbuf, c.wbuf[n:])]
		c.progress = time.Now()
	}
	return true
}

// wait has c watched for writing, and not for reading, until it is.
func (in *Inline) wait(c *iconn) {
	if !c.writing {
		c.writing = true
		c.progress = time.Now()
		in.watch(c)
	}
}

// sendFile sends the rest of q's file with sendfile; false when the socket
// is full or failed, as flush.
func (in *Inline) sendFile(c *iconn, q *ireq) bool {
	for q.fileLeft > 0 {
		n, err := unix.Sendfile(c.fd, int(q.file.Fd()), &q.fileOff, int(min(q.fileLeft, 1<<30)))
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			in.wait(c)
			return false
		}
		if err != nil || n == 0 { // the file shrank, or the client left
			q.broken = true
			break
		}
		q.fileLeft -= int64(n)
		c.progress = time.Now()
	}
	q.file.Close()
	q.file = nil
	return true
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
