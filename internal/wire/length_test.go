package wire

import (
	"strconv"
	"testing"
)

func TestLength(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name            string
		head            bool
		status          int
		named, measured int64
		length          int64
		body            bool
	}{
		{"GET, whole", false, 200, -1, 5, 5, true},
		{"GET, whole, named otherwise", false, 200, 9, 5, 5, true},
		{"GET, whole, empty", false, 200, -1, 0, 0, true},
		{"GET, stream", false, 200, -1, -1, -1, true},
		{"GET, stream, named", false, 200, 100, -1, 100, true},
		{"HEAD, named, no body", true, 200, 1234, 0, 1234, false},
		{"HEAD, named, the GET's body", true, 200, 1234, 1234, 1234, false},
		{"HEAD, named, another body", true, 200, 1234, 5, 1234, false},
		{"HEAD, named 0", true, 200, 0, 5, 0, false},
		{"HEAD, not named, a body", true, 200, -1, 5, 5, false},
		{"HEAD, not named, no body", true, 200, -1, 0, -1, false},
		{"HEAD, stream, named", true, 200, 100, -1, 100, false},
		{"HEAD, stream", true, 200, -1, -1, -1, false},
		{"HEAD, 404 with a body", true, 404, -1, 9, 9, false},
		{"304, named", false, 304, 1234, 0, 1234, false},
		{"304", false, 304, -1, 0, -1, false},
		{"HEAD, 304, named", true, 304, 1234, 0, 1234, false},
		{"204, named", false, 204, 5, 5, -1, false},
		{"HEAD, 204", true, 204, 5, 0, -1, false},
		{"103", false, 103, -1, 0, -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			length, body := Length(c.head, c.status, c.named, c.measured)
			if length != c.length || body != c.body {
				t.Errorf("Length(%v, %d, %d, %d) = %d, %v; want %d, %v", c.head, c.status, c.named, c.measured,
					length, body, c.length, c.body)
			}
			// The same decision with the length read from the headers.
			hdr := pack([2]string{"Content-Type", "text/plain"})
			if c.named >= 0 {
				hdr = append(hdr, pack([2]string{"Content-Length", strconv.FormatInt(c.named, 10)})...)
			}
			length, body = LengthOf(c.head, c.status, hdr, c.measured)
			if length != c.length || body != c.body {
				t.Errorf("LengthOf(%v, %d, %q, %d) = %d, %v; want %d, %v", c.head, c.status, hdr, c.measured,
					length, body, c.length, c.body)
			}
		})
	}
}
