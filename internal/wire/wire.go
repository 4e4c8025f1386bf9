// Package wire holds what the bridges share of HTTP/1.x on the wire: header
// name and length checks, and the head of a response a bridge writes to the
// connection itself.
package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// EqualFold reports whether the header name b is s, ASCII case ignored:
// two bytes that differ match only when both are the same ASCII letter in
// two cases. Unlike strings.EqualFold it folds no other letter ("Hoſt" is
// not Host), and unlike folding bit 0x20 alone no other byte ("Content\rType"
// is not Content-Type).
func EqualFold[T string | []byte](b T, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c, d := b[i], s[i]
		if c == d {
			continue
		}
		if l := c | 0x20; l != d|0x20 || l < 'a' || l > 'z' {
			return false
		}
	}
	return true
}

// ParseLength parses a Content-Length value: -1 for anything but digits.
func ParseLength(b []byte) int64 {
	if len(b) == 0 || len(b) > 18 {
		return -1
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// Forward calls fn for each header of an application's response that the
// server forwards, in order, and returns the Content-Length the application
// named (-1 for none). The server frames the body itself: Content-Length is
// measured or checked, Transfer-Encoding chosen, and trailers are not sent.
// head is the response's headers as the bridges pack them (EachPacked).
func Forward(head []byte, fn func(name, value []byte)) (appLength int64) {
	appLength = -1
	for len(head) > 0 {
		name, value, rest, ok := nextPacked(head)
		if !ok {
			break
		}
		head = rest
		switch {
		case EqualFold(name, "Content-Length"):
			appLength = ParseLength(value)
		case EqualFold(name, "Transfer-Encoding"), EqualFold(name, "Keep-Alive"), EqualFold(name, "Trailer"):
		default:
			fn(name, value)
		}
	}
	return appLength
}

// EachPacked calls fn for each pair of a packed header list,
// [u32 len][name][u32 len][value]... (little-endian), as the C side of the
// bridges writes them; it stops at a truncated pair.
func EachPacked(h []byte, fn func(name, value []byte)) {
	for len(h) > 0 {
		name, value, rest, ok := nextPacked(h)
		if !ok {
			return
		}
		fn(name, value)
		h = rest
	}
}

func nextPacked(h []byte) (name, value, rest []byte, ok bool) {
	if len(h) < 4 {
		return nil, nil, nil, false
	}
	n := int(binary.LittleEndian.Uint32(h))
	if 4+n+4 > len(h) {
		return nil, nil, nil, false
	}
	name, h = h[4:4+n], h[4+n:]
	v := int(binary.LittleEndian.Uint32(h))
	if 4+v > len(h) {
		return nil, nil, nil, false
	}
	return name, h[4 : 4+v], h[4+v:], true
}

// BodyAllowed reports whether a response with status may carry a body.
func BodyAllowed(status int) bool {
	return status != 204 && status != 304 && status >= 200
}

// Unhex is the value of a hex digit.
func Unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Target splits the target of a request fasthttp parsed into its path, as
// sent (not decoded, not cleaned), and its query.
func Target(ctx *fasthttp.RequestCtx) (path, query []byte) {
	uri := ctx.Request.Header.RequestURI()
	if len(uri) > 0 && uri[0] == '/' {
		path = uri
		if i := bytes.IndexByte(uri, '?'); i >= 0 {
			path, query = uri[:i], uri[i+1:]
		}
		return path, query
	}
	u := ctx.URI() // absolute-form, or "*"
	return u.PathOriginal(), u.QueryString()
}

// Path is the path of a request fasthttp parsed as the bridges and
// net/http's URL.Path see it: as sent, percent-decoded (a malformed escape
// kept as it is). fasthttp's own ctx.Path() is normalised ("/a/../b" is
// "/b" there, "//a" is "/a"), so a choice made on it would not be the one
// the handler behind makes.
func Path(ctx *fasthttp.RequestCtx) string {
	raw, _ := Target(ctx)
	if bytes.IndexByte(raw, '%') < 0 {
		return string(raw)
	}
	b, _ := Unescape(make([]byte, 0, len(raw)), raw, true)
	return string(b)
}

// PathIs reports whether the path of a request fasthttp parsed, as Path
// gives it, is want; it allocates nothing for a path without an escape.
// Every choice made on a path under fasthttp (a health or metrics path, a
// hold mount's prefix) is made on it, so that it is the one net/http's
// URL.Path gives.
func PathIs(ctx *fasthttp.RequestCtx, want string) bool {
	raw, _ := Target(ctx)
	if bytes.IndexByte(raw, '%') < 0 {
		return string(raw) == want
	}
	return Path(ctx) == want
}

// Client is the address a request fasthttp parsed came from, as Peer
// gives it.
func Client(ctx *fasthttp.RequestCtx) netip.AddrPort { return Peer(ctx.RemoteAddr()) }

// ClientOf is the address a request net/http parsed came from, as Peer
// gives it: every front-end choice and record of a client (the access log,
// the metrics, REMOTE_ADDR, the ASGI scope's client) is made on one of the
// two, so an IPv4 client of a dual-stack listener is 1.2.3.4 under both,
// never ::ffff:1.2.3.4 under one.
func ClientOf(r *http.Request) netip.AddrPort {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Peer is a connection's address as an AddrPort, an IPv4-mapped address
// unmapped; the zero AddrPort for an address that is not TCP's.
func Peer(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// HTTP1Date is the layout of the Date header.
const HTTP1Date = "Mon, 02 Jan 2006 15:04:05 GMT"

// WriteHead writes the head of a response a bridge sends on the connection
// itself, which closes after its body: the status line, the headers each
// gives (a Connection header is dropped), a Date unless one was given, a
// Content-Length when length is not negative (never on a 204, RFC 9110
// 8.6), and Connection: close.
func WriteHead(w *bufio.Writer, http11 bool, status int, each func(fn func(name, value []byte)), length int64) {
	if http11 {
		w.WriteString("HTTP/1.1 ")
	} else {
		w.WriteString("HTTP/1.0 ")
	}
	w.WriteString(strconv.Itoa(status))
	w.WriteByte(' ')
	w.WriteString(fasthttp.StatusMessage(status))
	w.WriteString("\r\n")
	dated := false
	each(func(name, value []byte) {
		if EqualFold(name, "Connection") {
			return // it closes, whatever the application said
		}
		dated = dated || EqualFold(name, "Date")
		w.Write(name)
		w.WriteString(": ")
		w.Write(value)
		w.WriteString("\r\n")
	})
	if !dated {
		w.WriteString("Date: ")
		w.WriteString(Date())
		w.WriteString("\r\n")
	}
	if length >= 0 && status != http.StatusNoContent {
		w.WriteString("Content-Length: ")
		w.WriteString(strconv.FormatInt(length, 10))
		w.WriteString("\r\n")
	}
	w.WriteString("Connection: close\r\n\r\n")
}

// Unescape appends the percent-decoded path to dst. A malformed escape
// makes it return false, unless lenient, where it is kept as it is (as
// uvicorn keeps it in an ASGI scope's path).
func Unescape(dst, path []byte, lenient bool) ([]byte, bool) {
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c != '%' {
			dst = append(dst, c)
			continue
		}
		if i+2 < len(path) {
			hi, ok1 := Unhex(path[i+1])
			lo, ok2 := Unhex(path[i+2])
			if ok1 && ok2 {
				dst = append(dst, hi<<4|lo)
				i += 2
				continue
			}
		}
		if !lenient {
			return dst, false
		}
		dst = append(dst, c)
	}
	return dst, true
}

// UnderPrefix reports whether path lies under the mount prefix (a path
// without a trailing slash, "" for none): path is prefix itself, or prefix
// and a slash and more. rest is what follows the prefix, "" or from the
// slash on: PATH_INFO beside SCRIPT_NAME = prefix.
func UnderPrefix(path, prefix string) (rest string, ok bool) {
	if !strings.HasPrefix(path, prefix) {
		return "", false
	}
	rest = path[len(prefix):]
	if rest != "" && rest[0] != '/' {
		return "", false
	}
	return rest, true
}

// FormatSize spells n as --max-body takes it: 4m, 512k, 1g, or bytes.
func FormatSize(n int64) string {
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{30, "g"}, {20, "m"}, {10, "k"}} {
		if n > 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
