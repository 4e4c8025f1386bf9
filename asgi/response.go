package asgi

import (
	"github.com/m0serve/m0/internal/wire"
)

// eachHeader calls fn for each header of a packed response head that the
// server forwards, and returns the Content-Length the application named
// (-1 for none); see wire.Forward.
func eachHeader(head []byte, fn func(name, value []byte)) (appLength int64) {
	return wire.Forward(head, fn)
}

var (
	equalFold   = wire.EqualFold[[]byte]
	bodyAllowed = wire.BodyAllowed
)

// chunkSize is how much of a request body the loop gets at once.
const chunkSize = 256 << 10
