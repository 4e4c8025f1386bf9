package strict

import (
	"bytes"
	"net/http"
)

// Limits of a request body's framing, and of what comes before a head.
const (
	// maxChunkLine bounds a chunk-size line with its extensions, and a
	// trailer line.
	maxChunkLine = 4 << 10
	// maxTrailer bounds a chunked body's trailer section.
	maxTrailer = 8 << 10
	// maxEmptyLines is how many empty lines may come before a request
	// line (RFC 9112 2.2: a server SHOULD ignore at least one).
	maxEmptyLines = 8
)

// Framer states.
const (
	inHead      = iota // at or inside a request head
	inLength           // in a body of known length
	inSize             // in a chunk-size line's digits
	inExt              // in a chunk-size line's extensions
	inSizeLF           // after the CR that ends a chunk-size line
	inData             // in a chunk's data
	inDataCR           // after a chunk's data: its CR
	inDataLF           // and its LF
	inTrailer          // at or in a trailer line
	inTrailerLF        // after a trailer line's CR
	inHold             // after an upgrade request: nothing passes until it is answered
	inPass             // after a switch of protocols: nothing is read as HTTP any more
	inRefused          // after a refusal: nothing more is passed
)

// Framer follows the framing of the requests on one connection. Its zero
// value is at the start of a connection.
type Framer struct {
	state     int
	part      int   // where in a chunk-size line's extensions, or in a trailer line
	left      int64 // bytes left of a body or of a chunk's data
	line      int   // bytes of the current chunk-size or trailer line
	trail     int   // bytes of the trailer section
	lineStart bool
	// searched is how far into an unfinished head the search for its end
	// has gone, so a head arriving a byte at a time is searched once.
	searched int
	// Cap is the most body bytes a request may announce in its
	// Content-Length; more is refused with 413 before any of the body is
	// read. Zero: no cap.
	Cap int64
	// Heads is how many request heads have been passed.
	Heads int
	// upgrade is the number (Heads) of the upgrade request being read,
	// whose body ends in inHold rather than at the next head.
	upgrade int
	// Err is the refusal that ended the connection's requests, if any.
	Err *Rejection
}

// Holding reports whether the Framer waits for the answer to an upgrade
// request, passing nothing: Switch if the answer switched protocols,
// Resume if it did not.
func (f *Framer) Holding() bool { return f.state == inHold }

// Passing reports whether the Framer has stopped reading the connection as
// HTTP: the protocols were switched (Switch).
func (f *Framer) Passing() bool { return f.state == inPass }

// Switch says that the upgrade request the Framer holds for was answered
// with 101: everything after it is passed as it comes.
func (f *Framer) Switch() {
	if f.state == inHold {
		f.state = inPass
	}
}

// Resume says that request number n (counting from 1 as Heads does) was
// answered; if it is the upgrade request the Framer holds for, the
// protocols were not switched, and the next request head is read.
func (f *Framer) Resume(n int) {
	if f.state == inHold && f.upgrade == n {
		f.state = inHead
	}
}

// bodyDone moves to what follows a request's body: the next head, or the
// hold after an upgrade request.
func (f *Framer) bodyDone() {
	f.state = inHead
	if f.upgrade == f.Heads && f.upgrade > 0 {
		f.state = inHold
	}
}

// Scan reads b, the connection's bytes from where the last Scan stopped,
// and returns how many of them it read, n, and how many it hands to the
// front end, m: b[:m], what it read less what it drops, moved up in place.
// It drops what neither front end's parser is to see: a request target's
// fragment (from its "#" on), a chunk's extensions and the fields of a
// trailer section, each once checked, so that both front ends read the
// same target and the same chunked framing. An unfinished head stops the
// scan at its start: those bytes are presented again, with more after
// them, on the next Scan. A refused head also stops it at its start, with
// the refusal; a refusal in a body stops it where the body went wrong.
// After a refusal Scan passes nothing.
func (f *Framer) Scan(b []byte) (n, m int, r *Rejection) {
	i, w := 0, 0
	// pass hands on the k bytes at i.
	pass := func(k int) {
		if w != i {
			copy(b[w:], b[i:i+k])
		}
		i, w = i+k, w+k
	}
	for i < len(b) {
		switch f.state {
		case inHead:
			n, r := f.head(b[i:])
			if r != nil {
				f.state, f.Err = inRefused, r
				return i, w, r
			}
			if n == 0 {
				return i, w, nil // unfinished
			}
			if from, to := fragment(b[i : i+n]); from < to {
				pass(from)
				i += to - from
				n -= to
			}
			pass(n)
		case inLength:
			n := int64(len(b) - i)
			if n >= f.left {
				pass(int(f.left))
				f.left = 0
				f.bodyDone()
			} else {
				f.left -= n
				pass(len(b) - i)
			}
		case inData:
			n := int64(len(b) - i)
			if n >= f.left {
				pass(int(f.left))
				f.left, f.state = 0, inDataCR
			} else {
				f.left -= n
				pass(len(b) - i)
			}
		case inPass:
			pass(len(b) - i)
		case inHold:
			return i, w, nil
		case inRefused:
			return i, w, f.Err
		default:
			drop, r := f.chunked(b[i])
			if r != nil {
				f.state, f.Err = inRefused, r
				return i, w, r
			}
			if drop {
				i++
			} else {
				pass(1)
			}
		}
	}
	return i, w, nil
}

// fragment returns where the fragment of the request target of head, a
// whole and valid request head, lies: from its "#" to the target's end;
// from == to for none. RFC 9112 3.2 has no fragment in a request target
// (a client is to leave it out); one sent is dropped, as gunicorn and
// uvicorn drop it, rather than read into the path or the query.
func fragment(head []byte) (from, to int) {
	s := 0
	for head[s] == '\r' {
		s += 2 // an empty line before the request line
	}
	line := head[s : s+bytes.IndexByte(head[s:], '\r')]
	a, z := bytes.IndexByte(line, ' ')+1, bytes.LastIndexByte(line, ' ')
	h := bytes.IndexByte(line[a:z], '#')
	if h < 0 {
		return 0, 0
	}
	return s + a + h, s + z
}

// bodyErr is a refusal of a chunked body.
func bodyErr(reason string) *Rejection {
	return &Rejection{Status: http.StatusBadRequest, Reason: reason, InBody: true}
}

// chunked takes one byte of a chunked body's framing (RFC 9112 7.1), and
// says whether it is dropped: a byte of a chunk's extensions or of a
// trailer field line. The front ends see each chunk as chunk-size CRLF
// chunk-data CRLF, and the last as "0" CRLF CRLF.
func (f *Framer) chunked(c byte) (drop bool, r *Rejection) {
	switch f.state {
	case inSize:
		if d := unhex(c); d >= 0 {
			if f.line >= 15 {
				return false, bodyErr("chunk size too large")
			}
			f.left = f.left<<4 | int64(d)
			f.line++
			return false, nil
		}
		if f.line == 0 {
			return false, bodyErr("chunk size is not hexadecimal")
		}
		switch c {
		case ';', ' ', '\t':
			f.state, f.part = inExt, extSize
			return true, f.ext(c)
		case '\r':
			f.state = inSizeLF
			return false, nil
		}
		return false, bodyErr("chunk size is not hexadecimal")
	case inExt:
		r := f.ext(c)
		return f.state == inExt, r
	case inSizeLF:
		if c != '\n' {
			return false, bodyErr("chunk-size line without CRLF")
		}
		f.line = 0
		if f.left == 0 {
			f.state, f.trail, f.lineStart, f.part = inTrailer, 0, true, trailerName
		} else {
			f.state = inData
		}
		return false, nil
	case inDataCR:
		if c != '\r' {
			return false, bodyErr("chunk data longer than its size")
		}
		f.state = inDataLF
		return false, nil
	case inDataLF:
		if c != '\n' {
			return false, bodyErr("chunk data longer than its size")
		}
		f.state, f.line, f.left = inSize, 0, 0
		return false, nil
	case inTrailer:
		return f.trailer(c)
	case inTrailerLF:
		if c != '\n' {
			return false, bodyErr("bare CR in the trailer section")
		}
		if f.lineStart { // an empty line: the end of the message
			f.bodyDone()
			return false, nil
		}
		f.state, f.lineStart, f.part = inTrailer, true, trailerName
		return true, nil
	}
	return false, nil
}

// Parts of a chunk-size line's extensions, RFC 9112 7.1.1:
//
//	chunk-ext      = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//	chunk-ext-name = token
//	chunk-ext-val  = token / quoted-string
//
// (quoted-string as RFC 9110 5.6.4 has it). Each is what was read last.
const (
	extSize    = iota // the size: ";" or BWS may follow
	extBWS            // BWS after the size or a value: only ";" may follow it
	extSemi           // ";" and any BWS after it: a name follows
	extName           // a name
	extNameBWS        // BWS after a name: "=" or ";" follows
	extEquals         // "=" and any BWS after it: a value follows
	extToken          // a token value
	extQuoted         // inside a quoted value
	extEscape         // a backslash inside it
	extClosed         // the closing quote of a value
)

// ext takes one byte of a chunk-size line's extensions, which RFC 9112
// 7.1.1 has a recipient ignore: they are checked against the grammar
// above, bounded, and dropped. The grammar puts BWS before a ";" or "="
// only, so a chunk-size line does not end in whitespace ("1 " CRLF), and a
// ";" is followed by a name ("1;" CRLF is refused).
func (f *Framer) ext(c byte) *Rejection {
	f.line++
	if f.line > maxChunkLine {
		return bodyErr("chunk extensions too long")
	}
	if c != '\t' && c != '\r' && (c < ' ' || c == 0x7f) {
		return bodyErr("control byte in a chunk extension")
	}
	bws := c == ' ' || c == '\t'
	switch p := f.part; {
	case p == extQuoted:
		switch c {
		case '"':
			f.part = extClosed
		case '\\':
			f.part = extEscape
		case '\r':
			return bodyErr("unterminated quoted chunk extension value")
		}
	case p == extEscape:
		if c == '\r' {
			return bodyErr("unterminated quoted chunk extension value")
		}
		f.part = extQuoted
	case c == '\r':
		switch p {
		case extName, extToken, extClosed:
			f.state = inSizeLF
		case extSemi:
			return bodyErr("chunk extension without a name")
		case extEquals:
			return bodyErr("chunk extension without a value")
		default:
			return bodyErr("whitespace at the end of a chunk-size line")
		}
	case c == ';' && p != extSemi && p != extEquals:
		f.part = extSemi
	case bws:
		switch p {
		case extSize, extToken, extClosed:
			f.part = extBWS
		case extName:
			f.part = extNameBWS
		}
	case c == '=' && (p == extName || p == extNameBWS):
		f.part = extEquals
	case tokenByte(c) && (p == extSemi || p == extName):
		f.part = extName
	case tokenByte(c) && (p == extEquals || p == extToken):
		f.part = extToken
	case c == '"' && p == extEquals:
		f.part = extQuoted
	case p == extSemi:
		return bodyErr("chunk extension without a name")
	case p == extEquals:
		return bodyErr("chunk extension without a value")
	default:
		return bodyErr("malformed chunk extension")
	}
	return nil
}

// Parts of a trailer field line (RFC 9112 5: field-name ":" OWS
// field-value OWS).
const (
	trailerName  = iota // at the start of a line, or in a field name
	trailerValue        // after the colon
)

// trailer takes one byte of a trailer section (RFC 9112 7.1.2). Its field
// lines are checked as a head's are and dropped, whatever their names: RFC
// 9112 7.1.2 lets a recipient discard trailer fields, and one that never
// reaches a parser or an application cannot frame, route or authorise
// anything (a Content-Length, Transfer-Encoding or Host there included).
// The empty line that ends the section is passed.
func (f *Framer) trailer(c byte) (drop bool, r *Rejection) {
	f.trail++
	if f.trail > maxTrailer {
		return false, bodyErr("trailer section too large")
	}
	start := f.lineStart
	f.lineStart = false
	switch {
	case c == '\n':
		return false, bodyErr("bare LF in the trailer section")
	case start && c == '\r':
		f.state, f.lineStart = inTrailerLF, true
		return false, nil
	case start && (c == ' ' || c == '\t'):
		return false, bodyErr("obsolete line folding in the trailer section")
	case f.part == trailerName && c == ':' && !start:
		f.part = trailerValue
	case f.part == trailerName && !tokenByte(c):
		return false, bodyErr("malformed trailer field")
	case c == '\r':
		f.state = inTrailerLF
	case f.part == trailerValue && !fieldByte(c):
		return false, bodyErr("control byte in the trailer section")
	}
	return true, nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// head takes a request head from the start of b: it returns its length once
// the head is whole and valid (and sets the framing of its body), 0 while
// it is unfinished, or the refusal.
func (f *Framer) head(b []byte) (int, *Rejection) {
	// Empty lines before a request line are skipped (and passed on).
	skip := 0
	for e := 0; e < maxEmptyLines && len(b) >= skip+2 && b[skip] == '\r' && b[skip+1] == '\n'; e++ {
		skip += 2
	}
	if len(b) == skip || (len(b) == skip+1 && b[skip] == '\r') {
		return 0, nil
	}
	from := max(f.searched, skip)
	end := -1
	for {
		j := bytes.IndexByte(b[from:], '\n')
		if j < 0 {
			break
		}
		j += from
		if j == 0 || b[j-1] != '\r' {
			f.searched = 0
			return 0, refuse(b[skip:], 400, "bare LF")
		}
		if j >= skip+3 && b[j-2] == '\n' { // CRLF CRLF
			end = j + 1
			break
		}
		from = j + 1
	}
	if end < 0 {
		if len(b)-skip > MaxHead {
			f.searched = 0
			if nl := bytes.IndexByte(b[skip:], '\n'); nl < 0 || nl > MaxHead/2 {
				return 0, refuse(b[skip:], 414, "request line too long")
			}
			return 0, refuse(b[skip:], 431, "request head too large")
		}
		f.searched = max(len(b)-1, skip)
		return 0, nil
	}
	f.searched = 0
	if end-skip > MaxHead {
		if nl := bytes.IndexByte(b[skip:], '\n'); nl > MaxHead/2 {
			return 0, refuse(b[skip:], 414, "request line too long")
		}
		return 0, refuse(b[skip:], 431, "request head too large")
	}
	fr, r := CheckHead(b[skip:end])
	if r != nil {
		return 0, r
	}
	if f.Cap > 0 && fr.Length > f.Cap {
		return 0, refuse(b[skip:], 413, "body over the size limit")
	}
	f.Heads++
	if fr.Upgrade {
		f.upgrade = f.Heads
	}
	switch {
	case fr.Chunked:
		f.state, f.left, f.line = inSize, 0, 0
	case fr.Length > 0:
		f.state, f.left = inLength, fr.Length
	default:
		f.bodyDone()
	}
	return end, nil
}
