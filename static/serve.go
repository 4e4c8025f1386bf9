package static

import (
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"unsafe"

	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"golang.org/x/sys/unix"
)

// Only GET and HEAD are the handler's; other methods, paths outside the
// prefix, paths it may not serve (dotfiles, "..") and files it does not
// have go to the next handler. A 404 of its own comes only when there is no
// next handler.

// ServeHTTP serves a request net/http parsed. A body goes out with the
// connection's ReadFrom: sendfile for a whole file or one range.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.netNext(w, r)
		return
	}
	rel, why := h.rel(r.URL.Path, r.URL.EscapedPath())
	switch why {
	case malformed:
		h.netError(w, http.StatusBadRequest)
		return
	case notMine, forbidden:
		h.netNext(w, r)
		return
	}
	f, err := h.openGated(rel, r.Header.Get("Accept-Encoding"))
	if err == errShut {
		wire.Error(w, http.StatusServiceUnavailable, true)
		return
	}
	if err != nil {
		h.netNext(w, r) // not there, or not the handler's to serve (a symlink out of the root)
		return
	}
	defer f.close()
	rep := h.decide(r.Header.Get, f)
	hdr := w.Header()
	for _, kv := range rep.header {
		hdr[kv[0]] = append(hdr[kv[0]], kv[1])
	}
	h.common(f.ctype, func(k, v string) { hdr[k] = []string{v} }, func(k, v string) { hdr[k] = append(hdr[k], v) })
	if rep.n >= 0 {
		hdr.Set("Content-Length", strconv.FormatInt(rep.n, 10))
	}
	w.WriteHeader(rep.status)
	if r.Method == http.MethodHead || rep.n < 0 {
		return
	}
	switch {
	case rep.parts != nil:
		io.CopyN(w, rep.parts, rep.n)
	case rep.n <= smallBody:
		if b, err := f.read(rep.off, rep.n); err == nil {
			w.Write(b)
		}
	default:
		// The connection's ReadFrom sends it with sendfile.
		if _, err := f.file().Seek(rep.off, io.SeekStart); err == nil {
			io.CopyN(w, f.file(), rep.n)
		}
	}
}

// smallBody is the largest body read into memory and written with its
// head in one write; a larger one is sent with sendfile. fasthttp reads
// files up to this size itself.
const smallBody = 8 << 10

// read reads n bytes of the file at off.
func (f *file) read(off, n int64) ([]byte, error) {
	if f.data != nil {
		return f.data[off : off+n : off+n], nil // no room to append into the kept copy
	}
	b := make([]byte, n)
	for got := int64(0); got < n; {
		k, err := unix.Pread(f.fd, b[got:], off+got)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return nil, io.ErrUnexpectedEOF // the file shrank
		}
		got += int64(k)
	}
	return b, nil
}

func (h *Handler) netNext(w http.ResponseWriter, r *http.Request) {
	if h.next != nil {
		h.next.ServeHTTP(w, r)
		return
	}
	h.netError(w, http.StatusNotFound)
}

func (h *Handler) netError(w http.ResponseWriter, status int) {
	hdr := w.Header()
	h.common("text/plain; charset=utf-8", func(k, v string) { hdr[k] = []string{v} }, func(k, v string) { hdr[k] = append(hdr[k], v) })
	http.Error(w, http.StatusText(status), status)
}

// common sets what every response of the handler carries: nosniff, an
// SVG's policy, and the configured headers (each set, or added when the
// name repeats among them).
func (h *Handler) common(ctype string, set, add func(k, v string)) {
	set("X-Content-Type-Options", "nosniff")
	if h.svgPolicy && ctype == "image/svg+xml" {
		set("Content-Security-Policy", SVGPolicy)
	}
	for i, hd := range h.headers {
		if h.repeat[i] {
			add(hd.Name, hd.Value)
		} else {
			set(hd.Name, hd.Value)
		}
	}
}

// ServeFastHTTP serves a request fasthttp parsed: m0serve's listener. A
// body goes out as the file itself, which fasthttp sends with sendfile.
func (h *Handler) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		h.fastNextOr404(ctx)
		return
	}
	raw, _ := wire.Target(ctx)
	b, ok := wire.Unescape(make([]byte, 0, len(raw)), raw, false)
	decoded := string(b)
	if !ok {
		h.fastNextOr404(ctx) // not a path it could have: the application's to judge
		return
	}
	rel, why := h.rel(decoded, string(raw))
	switch why {
	case malformed:
		h.fastError(ctx, fasthttp.StatusBadRequest)
		return
	case notMine, forbidden:
		h.fastNextOr404(ctx)
		return
	}
	f, err := h.openGated(rel, string(peek(ctx, "Accept-Encoding")))
	if err == errShut {
		wire.FastError(ctx, http.StatusServiceUnavailable, true)
		return
	}
	if err != nil {
		h.fastNextOr404(ctx)
		return
	}
	rep := h.decide(func(name string) string { return string(peek(ctx, name)) }, f)
	resp := &ctx.Response
	resp.Header.SetNoDefaultContentType(true)
	resp.SetStatusCode(rep.status)
	for _, kv := range rep.header {
		resp.Header.Add(kv[0], kv[1])
	}
	h.common(f.ctype, resp.Header.Set, resp.Header.Add)
	switch {
	case rep.status == fasthttp.StatusRequestedRangeNotSatisfiable:
		f.close()
		resp.SetBodyRaw(nil) // Content-Length: 0
	case rep.n < 0:
		f.close()
		resp.SkipBody = true
	case ctx.IsHead():
		f.close()
		resp.Header.SetContentLength(int(rep.n))
		resp.SkipBody = true
	case rep.parts != nil:
		resp.SetBodyStream(readCloser{rep.parts, f.closer()}, int(rep.n))
	case rep.n <= smallBody:
		b, err := f.read(rep.off, rep.n)
		f.close()
		if err != nil {
			h.fastError(ctx, fasthttp.StatusInternalServerError)
			return
		}
		resp.SetBodyRaw(b)
	default:
		if _, err := f.file().Seek(rep.off, io.SeekStart); err != nil {
			f.close()
			h.fastError(ctx, fasthttp.StatusInternalServerError)
			return
		}
		resp.SetBodyStream(&fileBody{f: f.file(), n: rep.n, conn: ctx.Conn()}, int(rep.n))
	}
}

// peek returns a request header by its canonical name (the form fasthttp
// keeps them in), without normalizing the name on every call as Peek does.
func peek(ctx *fasthttp.RequestCtx, canonical string) []byte {
	return ctx.Request.Header.PeekCanonical(bytesOf(canonical))
}

// bytesOf is s's bytes, not copied: for fasthttp's calls that only read them.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

func (h *Handler) fastNextOr404(ctx *fasthttp.RequestCtx) {
	switch {
	case h.fastNext != nil:
		h.fastNext(ctx)
	case h.next != nil:
		fasthttpadaptorServe(h.next, ctx)
	default:
		h.fastError(ctx, fasthttp.StatusNotFound)
	}
}

func (h *Handler) fastError(ctx *fasthttp.RequestCtx, status int) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	h.common("text/plain; charset=utf-8", ctx.Response.Header.Set, ctx.Response.Header.Add)
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(http.StatusText(status) + "\n")
}

// fasthttpadaptorServe serves a fasthttp request with a net/http handler.
func fasthttpadaptorServe(next http.Handler, ctx *fasthttp.RequestCtx) {
	fasthttpadaptor.NewFastHTTPHandler(next)(ctx)
}

// headStart is how much of a large body goes out with the head, in the
// same write, before sendfile sends the rest: as net/http sends its first
// 512 bytes. A head alone in its segment, then the file, served a third
// fewer 1 MiB responses a second on loopback.
const headStart = 512

// fileBody is a large body for fasthttp: its first bytes with the head,
// the rest by sendfile (fasthttp's writer reads a LimitedReader of an
// *os.File with the connection's ReadFrom), the connection corked
// meanwhile: the head and the body leave in full segments, and the client
// takes fewer, larger deliveries (1 MiB files at 64 connections on
// loopback: 0.70x nginx's rate uncorked, 0.98-1.01x corked; nginx corks
// too, tcp_nopush).
type fileBody struct {
	f    *os.File
	n    int64
	conn net.Conn
}

func (b *fileBody) Read(p []byte) (int, error) { return b.f.Read(p) }
func (b *fileBody) Close() error               { return b.f.Close() }

// SupportsBodyWriteTo has fasthttp call WriteTo rather than Read.
func (b *fileBody) SupportsBodyWriteTo() bool { return true }

func (b *fileBody) WriteTo(w io.Writer) (int64, error) {
	defer sock.Cork(b.conn)()
	var buf [headStart]byte
	k, err := io.ReadFull(b.f, buf[:min(int64(headStart), b.n)])
	if err != nil {
		return 0, err
	}
	if _, err := w.Write(buf[:k]); err != nil {
		return 0, err
	}
	rest := &io.LimitedReader{R: b.f, N: b.n - int64(k)}
	var n int64
	if rf, ok := w.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(rest)
	} else {
		n, err = io.Copy(w, rest)
	}
	return int64(k) + n, err
}

var _ fasthttp.BodyWriterTo = (*fileBody)(nil)
