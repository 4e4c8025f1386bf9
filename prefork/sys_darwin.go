package prefork

import "golang.org/x/sys/unix"

// roomForDatagrams raises a bus socket's buffers to carry a whole message
// (maxDatagram): macOS bounds a local datagram by the send buffer, 2 KB
// unless raised (net.local.dgram.maxdgram), and queues by the receive
// buffer.
func roomForDatagrams(fd int) {
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 2*maxDatagram)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4*maxDatagram)
}
