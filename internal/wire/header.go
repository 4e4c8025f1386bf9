package wire

import (
	"net/http"
	"net/textproto"
	"strconv"
	"sync/atomic"
	"time"
)

// AppLength is the Content-Length a packed response head names, or -1.
func AppLength(head []byte) int64 {
	n := int64(-1)
	EachPacked(head, func(name, value []byte) {
		if EqualFold(name, "Content-Length") {
			n = ParseLength(value)
		}
	})
	return n
}

// NetHeader writes the headers of a packed response head that the server
// forwards (see Forward) into hdr, a net/http ResponseWriter's, and a
// Content-Length of length when it is not negative. The application's
// headers replace what a middleware set under the same name before it, as
// Header().Set would, except Set-Cookie, Vary and Link, whose values are
// added alongside (see addedTo). A
// response without a Content-Type from either gets none (net/http would
// sniff one): it goes out as the application wrote it. The values of every
// header share one allocation; common names and values take none.
func NetHeader(hdr http.Header, head []byte, length int64) {
	n := 2 // the Content-Length and the Date
	EachPacked(head, func([]byte, []byte) { n++ })
	vals := make([]string, 0, n)
	// The names a middleware set, which the application's first value of
	// each replaces; none (and no allocation) without one.
	var before map[string]bool
	if len(hdr) > 0 {
		before = make(map[string]bool, len(hdr))
		for k := range hdr {
			before[k] = !addedTo[k]
		}
	}
	Forward(head, func(name, value []byte) {
		key, ok := canonical[string(name)]
		if !ok {
			key = textproto.CanonicalMIMEHeaderKey(string(name))
		}
		v, ok := common[string(value)]
		if !ok {
			v = string(value)
		}
		if replace, ok := before[key]; ok {
			delete(before, key)
			if replace {
				hdr[key] = nil
			}
		}
		if old := hdr[key]; len(old) > 0 {
			hdr[key] = append(old, v) // a repeated name, Set-Cookie say
			return
		}
		vals = append(vals, v)
		hdr[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	})
	if _, ok := hdr["Content-Type"]; !ok {
		hdr["Content-Type"] = nil
	}
	if _, ok := hdr["Date"]; !ok {
		// net/http formats its own for every response otherwise.
		vals = append(vals, Date())
		hdr["Date"] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if length >= 0 {
		vals = append(vals, strconv.FormatInt(length, 10))
		hdr["Content-Length"] = vals[len(vals)-1 : len(vals) : len(vals)]
	} else {
		delete(hdr, "Content-Length") // a middleware's, for a body it did not write
	}
}

// addedTo names the headers whose values from the application go beside
// a middleware's rather than replace them: each value is one more item of
// a list (a cookie, a header the cache varies on, a link).
var addedTo = map[string]bool{"Set-Cookie": true, "Vary": true, "Link": true}

// canonical maps common spellings of response header names to their
// canonical form without an allocation.
var canonical = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Content-Type", "Content-Encoding", "Content-Disposition", "Content-Language",
		"Cache-Control", "Set-Cookie", "Location", "Vary", "ETag", "Last-Modified", "Expires",
		"X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy",
		"Cross-Origin-Opener-Policy", "Strict-Transport-Security", "Content-Security-Policy",
		"Access-Control-Allow-Origin", "Server", "Date", "Connection", "Allow", "Accept-Ranges",
	} {
		c := textproto.CanonicalMIMEHeaderKey(k)
		m[k], m[c] = c, c
		lower := []byte(k)
		for i, b := range lower {
			if 'A' <= b && b <= 'Z' {
				lower[i] = b + 'a' - 'A'
			}
		}
		m[string(lower)] = c
	}
	return m
}()

// common holds values applications send often, so that sending one
// allocates nothing.
var common = func() map[string]string {
	m := map[string]string{}
	for _, v := range []string{
		"text/plain", "text/plain; charset=utf-8", "text/html", "text/html; charset=utf-8",
		"application/json", "text/event-stream", "text/css", "application/javascript",
		"text/javascript", "application/octet-stream", "text/plain; charset=UTF-8", "text/html; charset=UTF-8",
		"no-cache", "no-store", "nosniff", "DENY", "SAMEORIGIN", "same-origin", "Accept-Encoding",
		"Cookie", "Origin", "close", "keep-alive", "bytes", "gzip", "br", "*", "chunked",
	} {
		m[v] = v
	}
	return m
}()

// date is the Date header of responses sent in the current second, made
// once a second rather than per response.
var date atomic.Pointer[dateValue]

type dateValue struct {
	sec int64
	s   string
}

// Date returns the Date header for a response sent now.
func Date() string {
	now := time.Now()
	if d := date.Load(); d != nil && d.sec == now.Unix() {
		return d.s
	}
	d := &dateValue{sec: now.Unix(), s: now.UTC().Format(HTTP1Date)}
	date.Store(d)
	return d.s
}
