package static

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseHeader: a --static-header taken has a canonical name of token
// characters and a value without a control byte but HTAB (RFC 9110 5.1,
// 5.5), and written back as "Name: value" parses to itself.
func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{"X-Frame-Options: DENY", "cache-control:no-cache", "X: ", ":v", "A B: c", "X: a\r\nY: b", "X: a:b", " x-a :  b  ", "X:\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHeader(s)
		if err != nil {
			if h != (Header{}) {
				t.Fatalf("ParseHeader(%q) refused with %+v", s, h)
			}
			return
		}
		if h.Name == "" || h.Name != http.CanonicalHeaderKey(h.Name) || strings.ContainsFunc(h.Name, func(r rune) bool {
			return r <= ' ' || r >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r)
		}) || strings.ContainsFunc(h.Value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			t.Fatalf("ParseHeader(%q) = %+v", s, h)
		}
		again, err := ParseHeader(h.Name + ": " + h.Value)
		if err != nil || again != h {
			t.Fatalf("ParseHeader(%q) = %+v, which parses back as %+v, %v", s, h, again, err)
		}
	})
}

// FuzzParseRanges: every range read lies within the file and is not
// empty, and the ranges written back as a Range header read the same.
func FuzzParseRanges(f *testing.F) {
	for _, s := range []string{"bytes=0-4", "bytes=7-", "bytes=-3", "bytes=5-100", "bytes=10-", "bytes=-0", "bytes=x-y", "items=0-1", "bytes=5-2",
		"bytes=", "bytes=0-,0-,0-", "bytes= 0 - 1 , , 4-5", "bytes=-9223372036854775808", "bytes=9223372036854775807-"} {
		f.Add(s, int64(10))
	}
	f.Add("bytes=0-0", int64(0))
	f.Fuzz(func(t *testing.T, s string, size int64) {
		if size < 0 {
			size = -(size + 1)
		}
		ranges, ok := parseRanges(s, size)
		if !ok {
			if ranges != nil {
				t.Fatalf("parseRanges(%q, %d) refused with %v", s, size, ranges)
			}
			return
		}
		var spec []string
		for _, r := range ranges {
			if r.start < 0 || r.length < 1 || r.start > size-r.length {
				t.Fatalf("parseRanges(%q, %d): range %+v", s, size, r)
			}
			spec = append(spec, fmt.Sprintf("%d-%d", r.start, r.start+r.length-1))
		}
		if len(ranges) == 0 {
			return // none satisfiable: a 416
		}
		again, ok := parseRanges("bytes="+strings.Join(spec, ","), size)
		if !ok || fmt.Sprint(again) != fmt.Sprint(ranges) {
			t.Fatalf("parseRanges(%q, %d) = %v, written %q, reads %v, %v", s, size, ranges, spec, again, ok)
		}
	})
}

// FuzzDecide: whatever a request's Range and conditional headers, the
// answer for a file is a 200 of the whole, a 304, a 416, or a 206 whose
// Content-Range and body are exactly the bytes of the file it names, one
// range or a multipart/byteranges body of the length it declares.
func FuzzDecide(f *testing.F) {
	mod := time.Unix(1_700_000_000, 0)
	etag := `"18f-a"`
	lm := mod.UTC().Format(http.TimeFormat)
	for _, c := range [][4]string{
		{"bytes=0-4", "", "", ""},
		{"bytes=0-1, 4-5,-2", "", "", ""},
		{"bytes=0-1", etag, "", ""},
		{"bytes=0-1", lm, "", ""},
		{"bytes=0-1", "W/" + etag, "", ""},
		{"", "", etag, ""},
		{"", "", "*", ""},
		{"", "", "W/" + etag + ", \"x\"", ""},
		{"", "", "", lm},
		{"bytes=0-", "", "", "Mon, 02 Jan 2006 15:04:05 GMT"},
		{"bytes=10-", "", "", ""},
		{"bytes=0-0,0-0", "", "", ""},
	} {
		f.Add("0123456789", c[0], c[1], c[2], c[3], false)
	}
	f.Add("", "bytes=0-", "", "", "", false)
	f.Add("0123456789", "bytes=0-1,3-4", "", "", "", true)
	f.Fuzz(func(t *testing.T, content, rng, ifRange, inm, ims string, encoded bool) {
		data := []byte(content)
		fl := &file{data: data, fd: -1, size: int64(len(data)), mod: mod, etag: etag, ctype: "text/plain; charset=utf-8"}
		if encoded {
			fl.encoding, fl.vary = "gzip", true
		}
		h := &Handler{cache: "max-age=60"}
		get := func(name string) string {
			return map[string]string{"Range": rng, "If-Range": ifRange, "If-None-Match": inm, "If-Modified-Since": ims}[name]
		}
		rep := h.decide(get, fl)
		hdr := http.Header{}
		for _, kv := range rep.header {
			hdr.Add(kv[0], kv[1])
		}
		switch rep.status {
		case http.StatusOK:
			if rep.off != 0 || rep.n != fl.size || rep.parts != nil {
				t.Fatalf("200 of %d bytes sends %d at %d", fl.size, rep.n, rep.off)
			}
		case http.StatusNotModified:
			if inm == "" && ims == "" || rep.n >= 0 {
				t.Fatalf("304 without a condition, or with a body (%d)", rep.n)
			}
			for k := range hdr {
				if k != "Etag" && k != "Last-Modified" && k != "Cache-Control" && k != "Vary" {
					t.Fatalf("304 with %s", k)
				}
			}
		case http.StatusRequestedRangeNotSatisfiable:
			if rng == "" || rep.n >= 0 || hdr.Get("Content-Range") != "bytes */"+strconv.FormatInt(fl.size, 10) {
				t.Fatalf("416 for Range %q: n %d, %q", rng, rep.n, hdr)
			}
		case http.StatusPartialContent:
			if rng == "" {
				t.Fatal("206 without a Range")
			}
			if rep.parts == nil {
				checkPart(t, hdr.Get("Content-Range"), data, data[rep.off:rep.off+rep.n])
				return
			}
			if encoded {
				t.Fatal("a multipart body of a compressed file")
			}
			body, err := io.ReadAll(rep.parts)
			if err != nil || int64(len(body)) != rep.n {
				t.Fatalf("a multipart body of %d bytes declared %d: %v", len(body), rep.n, err)
			}
			mt, params, err := mime.ParseMediaType(hdr.Get("Content-Type"))
			if err != nil || mt != "multipart/byteranges" {
				t.Fatalf("206 of several ranges: Content-Type %q", hdr.Get("Content-Type"))
			}
			mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
			parts := 0
			for {
				p, err := mr.NextPart()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("part %d of %q: %v", parts, body, err)
				}
				b, _ := io.ReadAll(p)
				checkPart(t, p.Header.Get("Content-Range"), data, b)
				parts++
			}
			if parts < 2 || parts > maxRanges {
				t.Fatalf("%d parts", parts)
			}
		default:
			t.Fatalf("status %d", rep.status)
		}
	})
}

// checkPart checks that body is the range of data cr names.
func checkPart(t *testing.T, cr string, data, body []byte) {
	t.Helper()
	var first, last, size int64
	if n, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &first, &last, &size); n != 3 || err != nil {
		t.Fatalf("Content-Range %q: %v", cr, err)
	}
	if size != int64(len(data)) || first < 0 || last < first || last >= size || !bytes.Equal(body, data[first:last+1]) {
		t.Fatalf("Content-Range %q of %d bytes, with %q", cr, len(data), body)
	}
}

// FuzzAccepts: an Accept-Encoding value takes an encoding as RFC 9110
// 12.5.3 reads it: the first member that names it (case ignored), unless
// its weight, a parameter named q in any case and in any place among the
// member's parameters (blanks around its "=" allowed), is a qvalue of 0
// ("0", "0.", "0.0" to "0.000").
func FuzzAccepts(f *testing.F) {
	for _, s := range []string{"gzip", "br;q=0, gzip;q=0", "gzip;q=1, br;q=0", "GZIP ; q=0", "gzip;q=0.", "gzip;Q=0", "gzip;level=9;q=0",
		"gzip;q=0.000", "gzip;q=0.0001", "gzip;q= 0", "identity, *", "gzip, gzip;q=0", "x-gzip", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		for _, enc := range []string{"gzip", "br"} {
			if got, want := accepts(header, enc), acceptsRFC(header, enc); got != want {
				t.Fatalf("accepts(%q, %q) = %v, want %v", header, enc, got, want)
			}
		}
	})
}

// acceptsRFC is accepts as RFC 9110 reads Accept-Encoding.
// tokenEqual compares two tokens as RFC 9110 does: ASCII letters in either
// case, every other byte as itself ("zſtd" is not zstd).
func tokenEqual(a, b string) bool {
	lower := func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}
	return strings.Map(lower, a) == strings.Map(lower, b)
}

func acceptsRFC(header, enc string) bool {
	for _, member := range strings.Split(header, ",") {
		params := strings.Split(member, ";")
		if !tokenEqual(strings.Trim(params[0], " \t"), enc) {
			continue
		}
		for _, p := range params[1:] {
			name, value, ok := strings.Cut(p, "=")
			name, value = strings.Trim(name, " \t"), strings.Trim(value, " \t")
			if ok && tokenEqual(name, "q") {
				whole, frac, dot := strings.Cut(value, ".")
				return !(whole == "0" && (!dot || len(frac) <= 3 && strings.Trim(frac, "0") == ""))
			}
		}
		return true
	}
	return false
}
