package asgi

import (
	"encoding/binary"
	"errors"
)

// eachHeader calls fn for each header of a packed response head
// ([u32 len][name][u32 len][value]...) that the server forwards, and
// returns the Content-Length the application named (-1 for none). The
// server frames the body itself, so Transfer-Encoding is not forwarded.
func eachHeader(head []byte, fn func(name, value []byte)) (appLength int64) {
	appLength = -1
	for len(head) >= 4 {
		n := int(binary.LittleEndian.Uint32(head))
		if 4+n+4 > len(head) {
			return appLength
		}
		name := head[4 : 4+n]
		head = head[4+n:]
		v := int(binary.LittleEndian.Uint32(head))
		if 4+v > len(head) {
			return appLength
		}
		value := head[4 : 4+v]
		head = head[4+v:]
		switch {
		case equalFold(name, "content-length"):
			appLength = parseLength(value)
		case equalFold(name, "transfer-encoding"), equalFold(name, "keep-alive"):
		default:
			fn(name, value)
		}
	}
	return appLength
}

func parseLength(b []byte) int64 {
	if len(b) == 0 || len(b) > 18 {
		return -1
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// equalFold reports whether the header name b is s, ASCII case ignored; s
// is lowercase letters and hyphens.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != s[i] {
			return false
		}
	}
	return true
}

// bodyAllowed reports whether a response with status may carry a body.
func bodyAllowed(status int) bool {
	return status != 204 && status != 304 && status >= 200
}

// chunkSize is how much of a request body the loop gets at once.
const chunkSize = 256 << 10

var errFailed = errors.New("asgi: the application failed after the response started")

const internalError = "Internal Server Error\n"
