package wsgi

import (
	"bytes"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"unsafe"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

var (
	keyMethod     = cpython.KeyID("REQUEST_METHOD")
	keyPath       = cpython.KeyID("PATH_INFO")
	keyQuery      = cpython.KeyID("QUERY_STRING")
	keyLength     = cpython.KeyID("CONTENT_LENGTH")
	keyServerName = cpython.KeyID("SERVER_NAME")
	keyServerPort = cpython.KeyID("SERVER_PORT")
	keyProtocol   = cpython.KeyID("SERVER_PROTOCOL")
	keyRemoteAddr = cpython.KeyID("REMOTE_ADDR")
	keyRemotePort = cpython.KeyID("REMOTE_PORT")
	keyRequestURI = cpython.KeyID("REQUEST_URI")
	keyRawURI     = cpython.KeyID("RAW_URI")
	keyHost       = cpython.KeyID("HTTP_HOST")
	keyScript     = cpython.KeyID("SCRIPT_NAME")
)

// netEnviron packs the CGI variables of r, mounted at script ("" for none)
// with pathInfo the rest of its path (wire.UnderPrefix); the wsgi.* keys
// and an empty SCRIPT_NAME come from the interpreter's template,
// wsgi.input from the body.
func netEnviron(e *cpython.Environ, r *http.Request, bodyLen int, script, pathInfo string) {
	e.Reset()
	e.AddID(keyMethod, r.Method)
	// PATH_INFO is the decoded path, its bytes carried as latin-1 text;
	// below SCRIPT_NAME, what follows it.
	e.AddID(keyPath, pathInfo)
	if script != "" {
		e.AddID(keyScript, script)
	}
	e.AddID(keyQuery, r.URL.RawQuery)
	e.AddID(keyProtocol, r.Proto)
	e.AddID(keyRequestURI, r.RequestURI)
	e.AddID(keyRawURI, r.RequestURI)

	if _, sized := r.Header["Content-Length"]; sized || bodyLen > 0 || len(r.TransferEncoding) > 0 {
		e.AddID(keyLength, strconv.Itoa(bodyLen))
	}

	name, port := serverNamePort(r)
	e.AddID(keyServerName, name)
	e.AddID(keyServerPort, port)
	if r.Host != "" {
		e.AddID(keyHost, r.Host)
	}
	if host, port, ok := splitHostPort(r.RemoteAddr); ok {
		// An IPv4 client of an IPv6 listener, as the application sees it.
		if len(host) > 7 && host[:7] == "::ffff:" && strings.IndexByte(host, '.') > 0 {
			host = host[7:]
		}
		e.AddID(keyRemoteAddr, host)
		e.AddID(keyRemotePort, port)
	}

	for name, values := range r.Header {
		// A name with an underscore would share its CGI name with the
		// hyphenated one (X_Forwarded_For and X-Forwarded-For), so a client
		// could pose as the proxy: drop it, as gunicorn and nginx do.
		if skipHeader(name) {
			continue
		}
		switch len(values) {
		case 0:
			continue
		case 1:
			e.AddHeader(name, values[0])
		default:
			e.AddHeader(name, strings.Join(values, joinSep(name)))
		}
	}
}

// joinSep is what the values of a request header sent more than once are
// joined with, for its one environ key: "," (as gunicorn, granian and
// Werkzeug join them), and "; " for Cookie (PEP 3333; RFC 6265 5.4). Both
// builders join through it.
func joinSep(name string) string {
	if wire.EqualFold(name, "Cookie") {
		return "; "
	}
	return ","
}

// serverNamePort is SERVER_NAME and SERVER_PORT: from the Host header, as
// gunicorn does, or the address the connection arrived on.
func serverNamePort(r *http.Request) (string, string) {
	if r.Host != "" {
		if h, p, ok := splitHostPort(r.Host); ok {
			return h, p
		}
		return strings.Trim(r.Host, "[]"), "80"
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return ap.Addr().Unmap().String(), strconv.Itoa(int(ap.Port()))
		}
	}
	return "localhost", "80"
}

// splitHostPort splits "host:port" or "[host]:port" without allocating;
// false when s names no port.
func splitHostPort(s string) (host, port string, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 || i == len(s)-1 {
		return "", "", false
	}
	host, port = s[:i], s[i+1:]
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	} else if strings.IndexByte(host, ':') >= 0 {
		return "", "", false // an IPv6 address without brackets: no port
	}
	for j := 0; j < len(port); j++ {
		if port[j] < '0' || port[j] > '9' {
			return "", "", false
		}
	}
	return host, port, true
}

// fastEnviron packs the CGI variables of a request fasthttp parsed under
// the mount script ("" for none), as netEnviron does.
//
// Its status is 0 when the environ is made: 400 for a path that does not
// decode, 404 for one not under script.
func fastEnviron(e *cpython.Environ, ctx *fasthttp.RequestCtx, bodyLen int, scratch *[]byte, spans *[][4]int, script string) int {
	req := &ctx.Request.Header
	e.Reset()
	e.AddID(keyMethod, b2s(req.Method()))
	uri := req.RequestURI()
	path, query := wire.Target(ctx)
	decoded, ok := wire.Unescape((*scratch)[:0], path, false)
	*scratch = decoded
	if !ok {
		return fasthttp.StatusBadRequest
	}
	pathInfo, ok := wire.UnderPrefix(b2s(decoded), script)
	if !ok {
		return fasthttp.StatusNotFound
	}
	e.AddID(keyPath, pathInfo)
	if script != "" {
		e.AddID(keyScript, script)
	}
	e.AddID(keyQuery, b2s(query))
	e.AddID(keyProtocol, b2s(req.Protocol()))
	e.AddID(keyRequestURI, b2s(uri))
	e.AddID(keyRawURI, b2s(uri))
	// fasthttp names a Content-Length of 0 for a request of another
	// method than GET or HEAD that framed no body: CONTENT_LENGTH is there
	// only when the client framed one, as under net/http.
	if bodyLen > 0 || req.ContentLength() == -1 || len(req.Peek(fasthttp.HeaderContentLength)) > 0 && framed(req.RawHeaders()) {
		e.AddID(keyLength, strconv.Itoa(bodyLen))
	}

	host := req.Host()
	if len(host) > 0 {
		e.AddID(keyHost, b2s(host))
		if h, p, ok := splitHostPort(b2s(host)); ok {
			e.AddID(keyServerName, h)
			e.AddID(keyServerPort, p)
		} else {
			e.AddID(keyServerName, strings.Trim(b2s(host), "[]"))
			e.AddID(keyServerPort, "80")
		}
	} else if a, ok := ctx.LocalAddr().(*net.TCPAddr); ok {
		ap := a.AddrPort()
		e.AddID(keyServerName, ap.Addr().Unmap().String())
		e.AddID(keyServerPort, strconv.Itoa(int(ap.Port())))
	}
	if ap := wire.Client(ctx); ap.IsValid() {
		*scratch = ap.Addr().AppendTo((*scratch)[:0])
		e.AddID(keyRemoteAddr, b2s(*scratch))
		e.AddID(keyRemotePort, strconv.Itoa(int(ap.Port())))
	}

	// Repeated headers are joined, so gather them first (copied: fasthttp's
	// slices do not outlive the visit). The spans are the caller's, reused
	// from request to request: an array of them on the stack would grow
	// every connection's goroutine stack to 8 KiB, held while it idles.
	arena := (*scratch)[:0]
	sp := (*spans)[:0] // name and value, as offsets into arena
	for name, value := range req.All() {
		if skipHeader(b2s(name)) || equalFold(name, "Cookie") {
			continue
		}
		dup := -1
		for i := range sp {
			if equalFoldBytes(arena[sp[i][0]:sp[i][1]], name) {
				dup = i
				break
			}
		}
		if dup >= 0 {
			// Move the value to the end, joined with the new one.
			old := append([]byte(nil), arena[sp[dup][2]:sp[dup][3]]...)
			sp[dup][2] = len(arena)
			arena = append(append(append(arena, old...), joinSep(b2s(name))...), value...)
			sp[dup][3] = len(arena)
			continue
		}
		start := len(arena)
		arena = append(arena, name...)
		mid := len(arena)
		arena = append(arena, value...)
		sp = append(sp, [4]int{start, mid, mid, len(arena)})
	}
	for _, h := range sp {
		e.AddHeader(b2s(arena[h[0]:h[1]]), b2s(arena[h[2]:h[3]]))
	}
	*spans = sp[:0]
	// fasthttp parses cookies and writes them back its own way; the
	// application gets the Cookie lines as sent, joined with "; ".
	if raw := req.RawHeaders(); hasCookie(raw) {
		start := len(arena)
		for line := range bytes.Lines(raw) {
			name, value, ok := bytes.Cut(line, []byte(":"))
			if !ok || !equalFold(name, "Cookie") {
				continue
			}
			if len(arena) > start {
				arena = append(arena, joinSep("Cookie")...)
			}
			arena = append(arena, bytes.TrimSpace(value)...)
		}
		if len(arena) > start {
			e.AddHeader("Cookie", b2s(arena[start:]))
		}
	}
	*scratch = arena
	return 0
}

// hasCookie reports whether a raw header block holds a Cookie line, its
// name in any case.
func hasCookie(raw []byte) bool {
	for off := 0; ; {
		i := bytes.IndexByte(raw[off:], ':')
		if i < 0 {
			return false
		}
		i += off
		if i >= 6 && (i == 6 || raw[i-7] == '\n') && equalFold(raw[i-6:i], "Cookie") {
			return true
		}
		off = i + 1
	}
}

// framed reports whether a raw header block frames a body: a
// Content-Length or Transfer-Encoding line; true for no block at all (a
// request made in Go, not read from a connection).
func framed(raw []byte) bool {
	if len(raw) == 0 {
		return true
	}
	for line := range bytes.Lines(raw) {
		if n, _, ok := bytes.Cut(line, []byte(":")); ok && (equalFold(n, "Content-Length") || equalFold(n, "Transfer-Encoding")) {
			return true
		}
	}
	return false
}

// skipHeader reports whether a request header stays out of the environ:
// Host and Content-Length have keys of their own, Transfer-Encoding was
// undone, and a name with an underscore is dropped (see netEnviron).
func skipHeader(name string) bool {
	return strings.IndexByte(name, '_') >= 0 || wire.EqualFold(name, "Host") ||
		wire.EqualFold(name, "Content-Length") || wire.EqualFold(name, "Transfer-Encoding")
}

func equalFoldBytes(a, b []byte) bool { return equalFold(a, b2s(b)) }

// b2s views b as a string without copying; the Environ copies it at once.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
