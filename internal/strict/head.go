package strict

import (
	"bytes"

	"github.com/m0serve/m0/internal/wire"
)

// Limits of a request head.
const (
	// MaxHead is the most bytes of a request line and its headers (an 8
	// KiB cookie fits); past it the answer is 414 when the request line
	// alone is over half of it, 431 otherwise.
	MaxHead = 16 << 10
	// MaxHeaderLines is the most header lines a request may have (431).
	MaxHeaderLines = 100
)

// Framing is how a request's body is delimited.
type Framing struct {
	Length  int64 // the Content-Length, or 0
	Chunked bool
	// Upgrade: the request asks to switch protocols (Upgrade with
	// Connection: upgrade); what follows it is not read until it is
	// answered.
	Upgrade bool
}

// CheckHead checks one whole request head, from its request line to the
// empty line that ends it (CRLF line ends; Framer.Scan has checked that
// no LF stands alone), and returns the framing of its body.
func CheckHead(head []byte) (Framing, *Rejection) {
	var fr Framing
	bad := func(status int, reason string) (Framing, *Rejection) { return Framing{}, refuse(head, status, reason) }
	if !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		return bad(400, "unfinished request head")
	}
	nl := bytes.IndexByte(head, '\n')
	if nl < 1 || head[nl-1] != '\r' {
		return bad(400, "bare LF")
	}
	line := head[:nl-1]
	rest := head[nl+1:]

	// The request line: method SP request-target SP HTTP-version.
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return bad(400, "malformed request line")
	}
	method := line[:sp]
	for _, c := range method {
		if !tokenByte(c) {
			return bad(400, "malformed method")
		}
	}
	line = line[sp+1:]
	sp = bytes.LastIndexByte(line, ' ')
	if sp <= 0 {
		return bad(400, "malformed request line")
	}
	target, version := line[:sp], line[sp+1:]
	http10 := false
	switch {
	case string(version) == "HTTP/1.1":
	case string(version) == "HTTP/1.0":
		http10 = true
	case len(version) == 8 && string(version[:5]) == "HTTP/" && digit(version[5]) && version[6] == '.' && digit(version[7]):
		if version[5] != '1' {
			return bad(505, "HTTP version not supported")
		}
		// RFC 9110 2.5: a higher minor version is served as 1.1.
	default:
		return bad(400, "malformed HTTP version")
	}
	if r := checkTarget(method, target); r != "" {
		return bad(400, r)
	}
	if string(method) == "CONNECT" {
		return bad(501, "CONNECT is not served")
	}

	// The header lines.
	var (
		lines, hosts, lengths int
		te                    []byte
		teSeen, upgrade       bool
		connUpgrade           bool
	)
	for len(rest) > 2 {
		nl := bytes.IndexByte(rest, '\n')
		if nl < 1 || rest[nl-1] != '\r' {
			return bad(400, "bare LF")
		}
		field := rest[:nl-1]
		rest = rest[nl+1:]
		lines++
		if len(field) == 0 {
			return bad(400, "malformed header line")
		}
		if lines > MaxHeaderLines {
			return bad(431, "too many header lines")
		}
		if field[0] == ' ' || field[0] == '\t' {
			return bad(400, "obsolete line folding")
		}
		colon := bytes.IndexByte(field, ':')
		if colon <= 0 {
			return bad(400, "malformed header line")
		}
		name, value := field[:colon], trimOWS(field[colon+1:])
		for _, c := range name {
			if !tokenByte(c) {
				return bad(400, "malformed header name")
			}
		}
		for _, c := range value {
			if !fieldByte(c) {
				if c == '\r' {
					return bad(400, "bare CR")
				}
				return bad(400, "control byte in a header value")
			}
		}
		switch len(name) { // the names below, by length first
		case 4:
			if wire.EqualFold(name, "Host") {
				hosts++
				if !validHost(value) {
					return bad(400, "malformed Host")
				}
			}
		case 14:
			if wire.EqualFold(name, "Content-Length") {
				lengths++
				n, ok := decimal(value)
				if !ok {
					return bad(400, "malformed Content-Length")
				}
				fr.Length = n
			}
		case 17:
			if wire.EqualFold(name, "Transfer-Encoding") {
				if teSeen {
					te = append(append(te, ','), value...)
				} else {
					te, teSeen = append([]byte(nil), value...), true
				}
			}
		case 6:
			if wire.EqualFold(name, "Expect") && !wire.EqualFold(value, "100-continue") {
				return bad(417, "unknown expectation")
			}
		case 7:
			if wire.EqualFold(name, "Upgrade") {
				upgrade = upgrade || len(value) > 0
			}
		case 10:
			if wire.EqualFold(name, "Connection") {
				connUpgrade = connUpgrade || hasToken(value, "upgrade")
			}
		}
	}
	switch {
	case hosts > 1:
		return bad(400, "more than one Host")
	case hosts == 0 && !http10:
		return bad(400, "missing Host")
	case lengths > 1:
		return bad(400, "more than one Content-Length")
	}
	if teSeen {
		if http10 {
			return bad(400, "Transfer-Encoding in an HTTP/1.0 request")
		}
		if lengths > 0 {
			return bad(400, "both Content-Length and Transfer-Encoding")
		}
		codings, chunked, last := 0, 0, false
		for c := range bytes.SplitSeq(te, []byte(",")) {
			c = trimOWS(c)
			if len(c) == 0 {
				continue
			}
			codings++
			last = wire.EqualFold(c, "chunked")
			if last {
				chunked++
			}
		}
		switch {
		case codings == 0:
			return bad(400, "empty Transfer-Encoding")
		case chunked > 1:
			return bad(400, "chunked more than once")
		case chunked == 1 && !last:
			return bad(400, "chunked is not the final coding")
		case chunked == 0:
			return bad(501, "transfer coding not implemented")
		case codings > 1:
			return bad(501, "transfer coding not implemented")
		}
		fr.Chunked, fr.Length = true, 0
	}
	fr.Upgrade = upgrade && connUpgrade
	return fr, nil
}

// checkTarget returns what is wrong with a request target, or "".
func checkTarget(method, t []byte) string {
	if len(t) == 0 {
		return "empty request target"
	}
	for _, c := range t {
		// RFC 9112 3.2: a target is made of URI characters (RFC 3986),
		// all of them visible ASCII; any other byte is sent
		// percent-encoded.
		if c <= ' ' || c >= 0x7f {
			return "malformed request target"
		}
	}
	switch {
	case t[0] == '/':
		return ""
	case len(t) == 1 && t[0] == '*':
		if string(method) != "OPTIONS" {
			return "asterisk-form is for OPTIONS"
		}
		return ""
	case string(method) == "CONNECT":
		return "" // authority-form, refused after
	}
	// absolute-form: scheme "://" ...
	i := bytes.Index(t, []byte("://"))
	if i <= 0 {
		return "malformed request target"
	}
	for j, c := range t[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "malformed request target"
		}
	}
	return ""
}

// validHost reports whether v is a Host value: uri-host [ ":" port ], or
// empty (RFC 9112 3.2).
func validHost(v []byte) bool {
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case bytes.IndexByte([]byte("-._~%!$&'()*+,;=:[]"), c) >= 0:
		default:
			return false
		}
	}
	return true
}

// decimal parses a Content-Length: 1*DIGIT, at most 18 of them.
func decimal(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if !digit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func digit(c byte) bool { return '0' <= c && c <= '9' }

// tokenByte reports whether c may appear in a token (RFC 9110 5.6.2).
func tokenByte(c byte) bool { return tokenTable[c] }

var tokenTable = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// fieldByte reports whether c may appear in a field value: VCHAR, obs-text,
// SP or HTAB (RFC 9110 5.5).
func fieldByte(c byte) bool { return fieldTable[c] }

var fieldTable = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= ' ' && c != 0x7f || c == '\t'
	}
	return t
}()

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// hasToken reports whether the comma-separated list v names tok, in any
// case.
func hasToken(v []byte, tok string) bool {
	for e := range bytes.SplitSeq(v, []byte(",")) {
		if wire.EqualFold(trimOWS(e), tok) {
			return true
		}
	}
	return false
}
