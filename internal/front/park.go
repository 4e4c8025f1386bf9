package front

import (
	"net"
	"time"

	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/strict"
	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"
)

// An idle kept-alive connection served by fasthttp holds a goroutine, a
// read buffer, a write buffer and a request context between its requests
// (about 17 KiB of memory resident). When it waits for its next request
// with nothing of it arrived, it leaves fasthttp instead: fasthttp's read
// of the next request's first byte ends as a client's quiet close would,
// fasthttp's Close of it is not a close, and once fasthttp is done with it
// (its StateClosed) a goroutine of its own waits on Go's poller, and
// fasthttp serves it again (Server.ServeConn) once bytes arrive. The
// buffers go back to fasthttp's pools for the connections in flight; a
// waiting connection holds 2-5 KiB (the benchmark harness's measure).
//
// Leaving and coming back costs about 3 µs, a quarter of a small request,
// so a connection leaves at its first wait, and after that only at a wait
// that follows one of parkGap or longer: under load, a connection's next
// request comes sooner than that, and it stays. (docs/profiles.md, "An
// idle connection taken off fasthttp".)
const parkGap = time.Second

// parks reports whether fasthttp's read of c's next request should end
// with the connection leaving fasthttp, and if so marks it to. Called in
// Read: at phaseIdle fasthttp reads only the next request's first byte,
// with its read buffer empty. A connection that came back does not leave
// again before a request began on it.
func (c *limitConn) parks() bool {
	if c.ln == nil || c.ln.park == nil || c.ln.stopped.Load() || connPhase(c.phase.Load()) != phaseIdle || c.back.Load() {
		return false
	}
	if c.left.Load() && c.lastGap.Load() < int64(parkGap) {
		return false
	}
	if s := strict.Of(c.Conn); s == nil || !s.Between() {
		return false
	}
	if _, err := sock.RawConn(c.Conn); err != nil || sock.Pending(c.Conn) {
		return false // no socket to wait on, or bytes to read (held by a wrapper, or on it)
	}
	c.base.Store(c.lastNum.Load())
	c.left.Store(true)
	c.away.Store(true)
	return true
}

// leaving reports whether fasthttp's StateClosed for c is its leaving, not
// its close: fasthttp's Close of it was not a close (Close, away, set
// waiting), and nothing has closed it since. fasthttp reports StateClosed
// once a serving, and wait clears waiting before the next.
func leaving(c net.Conn) (*limitConn, bool) {
	lc, ok := c.(*limitConn)
	if !ok || !lc.waiting.Load() || lc.closed.Load() {
		return nil, false
	}
	return lc, true
}

// wait waits for c, out of fasthttp, to be readable, and has fasthttp serve
// it again; a client that closed it, or an error, closes it here. The read
// deadline the idle wait set (fastDeadline) holds: past it, or once the
// connection is closed (a drain), it closes.
func (c *limitConn) wait() {
	rc, err := sock.RawConn(c.Conn)
	if err != nil || c.ln.stopped.Load() {
		// closeWaiting sets stopped before it looks for waiting
		// connections, and Close set waiting before this began: one of
		// the two closes a connection that left as a drain ran out.
		c.Close()
		return
	}
	data := false
	for {
		err = rc.Read(func(fd uintptr) bool {
			var b [1]byte
			n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			if err == unix.EAGAIN || err == unix.EWOULDBLOCK {
				return false
			}
			data = err == nil && n > 0
			return true
		})
		if err == nil || !c.rd.Retry(c.Conn, err) { // Retry: an earlier deadline than the one asked for passed
			break
		}
	}
	c.waiting.Store(false)
	if err != nil || !data || c.ln.stopped.Load() {
		c.Close()
		return
	}
	c.back.Store(true)
	c.ln.park.ServeConn(c) // its Close, at the end, closes c or has it leave again
}

// cameBack reports whether ctx's connection came back to fasthttp and no
// request has begun on it since: an error then is the read of a next
// request's first byte failing (a head that never came whole within the
// idle deadline, a reset), which fasthttp hands its ErrorHandler only on a
// connection's first request, and which gets no answer.
func cameBack(ctx *fasthttp.RequestCtx) bool {
	lc, ok := ctx.Conn().(*limitConn)
	return ok && lc.back.Load()
}

// requestNum is the number on its connection of the request ctx carries,
// counted from the connection's first: fasthttp counts from 1 again each
// time it serves a connection that came back (the strict reading's hold
// after an upgrade request counts from the first).
func requestNum(ctx *fasthttp.RequestCtx) int {
	n := int(ctx.ConnRequestNum())
	if lc, ok := ctx.Conn().(*limitConn); ok {
		n += int(lc.base.Load())
		lc.lastNum.Store(int64(n))
	}
	return n
}

// closeWaiting closes every connection waiting out of fasthttp, which
// fasthttp's own shutdown does not see, and has one that wakes close rather
// than come back.
func (l *limitListener) closeWaiting() {
	l.stopped.Store(true)
	l.mu.Lock()
	var waiting []*limitConn
	for c := range l.conns {
		if c.waiting.Load() {
			waiting = append(waiting, c)
		}
	}
	l.mu.Unlock()
	for _, c := range waiting {
		c.Close()
	}
}
