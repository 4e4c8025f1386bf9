package wsgi

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/m0serve/m0/internal/cpython"
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
)

// buildEnviron packs the CGI variables of r; the wsgi.* keys and SCRIPT_NAME
// come from the interpreter's template, wsgi.input from the body.
func buildEnviron(e *cpython.Environ, r *http.Request, bodyLen int) {
	e.Reset()
	e.AddID(keyMethod, r.Method)
	// PATH_INFO is the decoded path, its bytes carried as latin-1 text.
	e.AddID(keyPath, r.URL.Path)
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
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		e.AddID(keyRemoteAddr, ap.Addr().Unmap().String())
		e.AddID(keyRemotePort, strconv.Itoa(int(ap.Port())))
	}

	for name, values := range r.Header {
		// A name with an underscore would share its CGI name with the
		// hyphenated one (X_Forwarded_For and X-Forwarded-For), so a client
		// could pose as the proxy: drop it, as gunicorn and nginx do.
		if strings.IndexByte(name, '_') >= 0 || name == "Content-Length" {
			continue
		}
		switch len(values) {
		case 0:
			continue
		case 1:
			e.AddHeader(name, values[0])
		default:
			sep := ", "
			if name == "Cookie" {
				sep = "; "
			}
			e.AddHeader(name, strings.Join(values, sep))
		}
	}
}

// serverNamePort is SERVER_NAME and SERVER_PORT: from the Host header, as
// gunicorn does, or the address the connection arrived on.
func serverNamePort(r *http.Request) (string, string) {
	if r.Host != "" {
		if h, p, err := net.SplitHostPort(r.Host); err == nil {
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
