//go:build !linux || race || msan || asan

package sock

import "net"

// NewRawIO returns c. Raw reads and writes are Linux's, and under the race
// detector (or msan, asan) a connection keeps net's own: the detector
// learns of the order two goroutines' reads and writes of a socket give,
// and the sanitizers of the bytes a read wrote, only from them.
func NewRawIO(c net.Conn) net.Conn { return c }

// Raw reports whether c, or a connection under it, is read and written
// with raw system calls: never here.
func Raw(net.Conn) bool { return false }
