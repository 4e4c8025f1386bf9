package wire

import "net/http"

// Length decides a response's Content-Length (-1: none) and whether its
// body is written, the same for both bridges on both front ends. head is a
// HEAD request; named is the Content-Length the application set (-1: none);
// measured is the length of a body gathered whole, -1 for a stream.
//
//   - A HEAD's body is never written. Its Content-Length is the one a GET
//     would have sent (RFC 9110 9.3.2, 8.6): the application's as it set
//     it, else the measured length of a body it produced; none when it set
//     none and produced none, as nothing tells that length.
//   - A 304 carries the application's length (that of the representation);
//     a 1xx or 204 none; neither has a body.
//   - Otherwise a whole body is sent with its measured length (one the
//     application named otherwise is replaced), and a stream with the
//     length the application named, or none (chunked, or until the
//     connection closes).
func Length(head bool, status int, named, measured int64) (length int64, body bool) {
	switch {
	case status == http.StatusNotModified:
		return named, false
	case !BodyAllowed(status):
		return -1, false
	case head && named >= 0:
		return named, false
	case head && measured > 0:
		return measured, false
	case head:
		return -1, false
	case measured >= 0:
		return measured, true
	}
	return named, true
}

// LengthOf is Length with the application's Content-Length taken from its
// packed headers (see AppLength), which it scans only where Length reads
// it: a 304, a HEAD, or a stream. A whole body's response, the common one,
// is not scanned for it.
func LengthOf(head bool, status int, hdr []byte, measured int64) (length int64, body bool) {
	named := int64(-1)
	if head || status == http.StatusNotModified || measured < 0 {
		named = AppLength(hdr)
	}
	return Length(head, status, named, measured)
}
