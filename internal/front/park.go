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
// its Close hands the connection to a goroutine of its own that waits on
// Go's poller, and fasthttp serves it again (Server.ServeConn) once bytes
// arrive. The buffers go back to fasthttp's pools for the connections in
// flight; a waiting connection holds about 4-6 KiB.
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
// with its read buffer empty.
func (c *limitConn) parks() bool {
	if c.ln == nil || c.ln.park == nil || connPhase(c.phase.Load()) != phaseIdle {
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

// readable reports whether a read of fd would not wait: bytes, the end of
// the stream, or an error to read.
func readable(fd uintptr) bool {
	var b [1]byte
	_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err != unix.EAGAIN && err != unix.EWOULDBLOCK
}

// wait waits for c, out of fasthttp, to be readable, and has fasthttp serve
// it again. The read deadline the idle wait set (fastDeadline) holds: past
// it, or once the connection is closed (a drain's closeQuiet), it closes.
func (c *limitConn) wait(srv *fasthttp.Server) {
	rc, err := sock.RawConn(c.Conn)
	for err == nil {
		if err = rc.Read(readable); err == nil {
			srv.ServeConn(c) // its Close, at the end, closes c or sends it here again
			return
		}
		if c.rd.Retry(c.Conn, err) {
			err = nil // an earlier deadline than the one asked for passed
		}
	}
	c.Close()
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

// gone reports whether fasthttp's StateClosed for c is its leaving, not
// its close: the connection is open and will be served again.
func gone(c net.Conn) bool {
	lc, ok := c.(*limitConn)
	return ok && !lc.closed.Load()
}
