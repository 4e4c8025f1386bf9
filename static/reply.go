package static

import (
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// reply is what the handler answers for a file, whichever server parsed
// the request: a status, headers, and a body that is one range of the file
// (sent with sendfile), a multipart body, or nothing.
type reply struct {
	status int
	header [][2]string
	f      *file
	off, n int64     // the range of f to send; n < 0: no body from f
	parts  io.Reader // a multipart/byteranges body of n bytes
}

func (r *reply) add(name, value string) { r.header = append(r.header, [2]string{name, value}) }

// lastDate is the last Last-Modified formatted: files served together were
// often written together.
var lastDate atomic.Pointer[struct {
	sec int64
	s   string
}]

func httpDate(t time.Time) string {
	sec := t.Unix()
	if d := lastDate.Load(); d != nil && d.sec == sec {
		return d.s
	}
	s := t.Format(http.TimeFormat)
	lastDate.Store(&struct {
		sec int64
		s   string
	}{sec, s})
	return s
}

// maxRanges bounds the ranges of one request; more are answered whole.
const maxRanges = 32

// decide answers a GET or HEAD for f (RFC 9110 sections 13 and 14).
func (h *Handler) decide(get func(name string) string, f *file) *reply {
	r := &reply{status: http.StatusOK, f: f, n: f.size, header: make([][2]string, 0, 8)}
	lastMod := f.mod.UTC().Truncate(time.Second)
	r.add("Content-Type", f.ctype)
	r.add("Last-Modified", httpDate(lastMod))
	r.add("ETag", f.etag)
	r.add("Accept-Ranges", "bytes")
	if f.encoding != "" {
		r.add("Content-Encoding", f.encoding)
	}
	if f.vary {
		r.add("Vary", "Accept-Encoding")
	}
	if h.cache != "" {
		r.add("Cache-Control", h.cache)
	}
	if inm := get("If-None-Match"); inm != "" {
		if etagMatch(inm, f.etag, false) {
			return notModified(r)
		}
	} else if ims := get("If-Modified-Since"); ims != "" {
		if t, err := http.ParseTime(ims); err == nil && !lastMod.After(t) {
			return notModified(r)
		}
	}
	rng := get("Range")
	if rng == "" || !ifRange(get("If-Range"), f.etag, lastMod) {
		return r
	}
	ranges, ok := parseRanges(rng, f.size)
	var total int64
	for _, rg := range ranges {
		total += rg.length
	}
	switch {
	case !ok || len(ranges) > maxRanges:
		return r // not a range we read: the whole file
	case len(ranges) > 1 && (total > f.size || f.encoding != ""):
		// Ranges that ask for more than the file (overlapping, repeated)
		// get it once; and a compressed file's parts would be neither the
		// encoding nor the type their headers name.
		return r
	case len(ranges) == 0:
		r.status, r.n = http.StatusRequestedRangeNotSatisfiable, -1
		r.header = r.header[:0]
		r.add("Content-Range", "bytes */"+strconv.FormatInt(f.size, 10))
		return r
	case len(ranges) == 1:
		r.status, r.off, r.n = http.StatusPartialContent, ranges[0].start, ranges[0].length
		r.add("Content-Range", ranges[0].contentRange(f.size))
		return r
	}
	r.status = http.StatusPartialContent
	r.parts, r.n = multipartBody(f, ranges, r)
	return r
}

func notModified(r *reply) *reply {
	// RFC 9110 15.4.5: the headers a 200 would have sent that describe the
	// representation's validators and caching.
	var keep [][2]string
	for _, h := range r.header {
		switch h[0] {
		case "ETag", "Last-Modified", "Cache-Control", "Vary":
			keep = append(keep, h)
		}
	}
	r.status, r.header, r.n = http.StatusNotModified, keep, -1
	return r
}

// etagMatch compares an If-None-Match (weak) or If-Range (strong) value
// with etag.
func etagMatch(list, etag string, strong bool) bool {
	if strings.TrimSpace(list) == "*" {
		return true
	}
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		weak := strings.HasPrefix(t, "W/")
		if weak {
			if strong {
				continue
			}
			t = t[2:]
		}
		if t == etag {
			return true
		}
	}
	return false
}

// ifRange reports whether a Range applies under an If-Range value.
func ifRange(v, etag string, lastMod time.Time) bool {
	if v == "" {
		return true
	}
	if strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "W/") {
		return etagMatch(v, etag, true)
	}
	t, err := http.ParseTime(v)
	return err == nil && t.Equal(lastMod)
}

type byteRange struct{ start, length int64 }

func (b byteRange) contentRange(size int64) string {
	return fmt.Sprintf("bytes %d-%d/%d", b.start, b.start+b.length-1, size)
}

// parseRanges reads a Range header for a file of size bytes: ok false for
// a header it does not read (the whole file is sent), no ranges for one
// none of whose ranges is satisfiable (416).
func parseRanges(s string, size int64) (ranges []byteRange, ok bool) {
	spec, found := strings.CutPrefix(s, "bytes=")
	if !found {
		return nil, false
	}
	parts := 0
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		parts++
		first, last, found := strings.Cut(part, "-")
		if !found {
			return nil, false
		}
		first, last = strings.TrimSpace(first), strings.TrimSpace(last)
		var r byteRange
		if first == "" { // a suffix: the last N bytes
			n, err := strconv.ParseInt(last, 10, 64)
			if err != nil || n < 0 {
				return nil, false
			}
			if n == 0 || size == 0 {
				continue
			}
			n = min(n, size)
			r = byteRange{size - n, n}
		} else {
			a, err := strconv.ParseInt(first, 10, 64)
			if err != nil || a < 0 {
				return nil, false
			}
			b := size - 1
			if last != "" {
				if b, err = strconv.ParseInt(last, 10, 64); err != nil || b < a {
					return nil, false
				}
				b = min(b, size-1)
			}
			if a >= size {
				continue // unsatisfiable
			}
			r = byteRange{a, b - a + 1}
		}
		ranges = append(ranges, r)
	}
	if parts == 0 {
		return nil, false // "bytes=": no range at all, not an unsatisfiable one
	}
	return ranges, true
}

// multipartBody is the multipart/byteranges body of ranges of f, and its
// length; it sets the reply's Content-Type.
func multipartBody(f *file, ranges []byteRange, r *reply) (io.Reader, int64) {
	mw := multipart.NewWriter(io.Discard)
	ctype := f.ctype
	var readers []io.Reader
	var total int64
	for _, rg := range ranges {
		h := textproto.MIMEHeader{"Content-Range": {rg.contentRange(f.size)}, "Content-Type": {ctype}}
		var sb strings.Builder
		pw := multipart.NewWriter(&sb)
		pw.SetBoundary(mw.Boundary())
		pw.CreatePart(h)
		head := sb.String()
		if len(readers) > 0 {
			head = "\r\n" + head // the line break before a delimiter belongs to it
		}
		readers = append(readers, strings.NewReader(head), io.NewSectionReader(f.readerAt(), rg.start, rg.length))
		total += int64(len(head)) + rg.length
	}
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	readers = append(readers, strings.NewReader(tail))
	total += int64(len(tail))
	for i, hd := range r.header {
		if hd[0] == "Content-Type" {
			r.header[i][1] = "multipart/byteranges; boundary=" + mw.Boundary()
		}
	}
	return io.MultiReader(readers...), total
}
