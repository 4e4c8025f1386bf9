package asgi

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// scope packs a request for the loop in the layout asgi.c reads: four u32
// (flags, client port, server port, header count), then method, path
// (decoded), raw path, query, client host, server host and root path, the
// headers as name/value pairs, and the first body chunk, each as a u32
// length and its bytes.
type scope struct {
	b  []byte
	nh int
}

func (s *scope) begin(http11 bool, client, server netip.AddrPort) {
	var flags uint32
	if http11 {
		flags = cpython.ScopeHTTP11
	}
	s.b = binary.LittleEndian.AppendUint32(s.b[:0], flags)
	s.b = binary.LittleEndian.AppendUint32(s.b, uint32(client.Port()))
	s.b = binary.LittleEndian.AppendUint32(s.b, uint32(server.Port()))
	s.b = append(s.b, 0, 0, 0, 0) // the header count, set by end
	s.nh = 0
}

func (s *scope) str(v []byte) {
	s.b = binary.LittleEndian.AppendUint32(s.b, uint32(len(v)))
	s.b = append(s.b, v...)
}

func (s *scope) string(v string) {
	s.b = binary.LittleEndian.AppendUint32(s.b, uint32(len(v)))
	s.b = append(s.b, v...)
}

// addr packs an address's host, as text ("" when there is none).
func (s *scope) addr(a netip.AddrPort) {
	if !a.IsValid() {
		s.string("")
		return
	}
	at := len(s.b)
	s.b = append(s.b, 0, 0, 0, 0)
	s.b = a.Addr().Unmap().AppendTo(s.b)
	binary.LittleEndian.PutUint32(s.b[at:], uint32(len(s.b)-at-4))
}

// target packs the path (decoded), the raw path and the query.
func (s *scope) target(raw, query []byte) {
	at := len(s.b)
	s.b = append(s.b, 0, 0, 0, 0)
	// A malformed escape is kept as it is, as uvicorn keeps it.
	s.b, _ = wire.Unescape(s.b, raw, true)
	binary.LittleEndian.PutUint32(s.b[at:], uint32(len(s.b)-at-4))
	s.str(raw)
	s.str(query)
}

// header packs one header, its name lowercased.
func (s *scope) header(name, value []byte) {
	s.b = binary.LittleEndian.AppendUint32(s.b, uint32(len(name)))
	for _, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		s.b = append(s.b, c)
	}
	s.str(value)
	s.nh++
}

func (s *scope) end(body []byte) []byte {
	binary.LittleEndian.PutUint32(s.b[12:], uint32(s.nh))
	s.str(body)
	return s.b
}

// rawHeaders calls fn for each header line of a raw header block, as sent:
// order, repeats and spelling kept.
func rawHeaders(raw []byte, fn func(name, value []byte)) {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		line = bytes.TrimRight(line, "\r")
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			continue
		}
		fn(line[:colon], bytes.Trim(line[colon+1:], " \t"))
	}
}

// fastScope packs a request fasthttp parsed.
func (s *scope) fast(ctx *fasthttp.RequestCtx, rootPath string) {
	req := &ctx.Request.Header
	client, server := wire.Client(ctx), wire.Peer(ctx.LocalAddr())
	s.begin(req.IsHTTP11(), client, server)
	s.str(req.Method())
	s.target(wire.Target(ctx))
	s.addr(client)
	s.addr(server)
	s.string(rootPath)
	rawHeaders(req.RawHeaders(), s.header)
}

// netScope packs a request net/http parsed. net/http keeps no header
// order: headers come name by name, each name's values in order. It keeps
// no Trailer line of a chunked request either, nor the spelling of its
// Transfer-Encoding ("chunked").
func (s *scope) net(r *http.Request, rootPath string) {
	client := wire.ClientOf(r)
	var server netip.AddrPort
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		server = wire.Peer(a)
	}
	s.begin(r.ProtoAtLeast(1, 1), client, server)
	s.string(r.Method)
	raw := r.URL.EscapedPath()
	if r.RequestURI != "" && r.RequestURI[0] == '/' {
		raw, _, _ = strings.Cut(r.RequestURI, "?")
	}
	s.target([]byte(raw), []byte(r.URL.RawQuery))
	s.addr(client)
	s.addr(server)
	s.string(rootPath)
	if r.Host != "" {
		s.header([]byte("host"), []byte(r.Host))
	}
	for name, values := range r.Header {
		for _, v := range values {
			s.header([]byte(name), []byte(v))
		}
	}
	if len(r.TransferEncoding) > 0 {
		// net/http takes Transfer-Encoding out of the header; the client
		// sent it, and fasthttp's scope has it.
		s.header([]byte("transfer-encoding"), []byte(strings.Join(r.TransferEncoding, ", ")))
	}
}
