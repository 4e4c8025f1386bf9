package sock

import (
	"net"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/testutil"
)

func TestWatchClose(t *testing.T) {
	for _, tt := range []struct {
		name  string
		leave func(c net.Conn)
	}{
		{"close", func(c net.Conn) { c.Close() }},
		{"half-close", func(c net.Conn) { c.(*net.TCPConn).CloseWrite() }},
		{"reset", func(c net.Conn) { c.(*net.TCPConn).SetLinger(0); c.Close() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			server, client := testutil.TCPPair(t)
			gone := make(chan struct{}, 2)
			stop := WatchClose(server, func() { gone <- struct{}{} })
			defer stop()
			// Data waiting in the socket (a pipelined request) is not leaving.
			client.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
			select {
			case <-gone:
				t.Fatal("gone on data")
			case <-time.After(100 * time.Millisecond):
			}
			tt.leave(client)
			select {
			case <-gone:
			case <-time.After(time.Second):
				t.Fatal("not told within a second")
			}
			select {
			case <-gone:
				t.Fatal("told twice")
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}

func TestWatchStopped(t *testing.T) {
	server, client := testutil.TCPPair(t)
	gone := make(chan struct{}, 1)
	stop := WatchClose(server, func() { gone <- struct{}{} })
	stop()
	stop() // harmless
	client.Close()
	select {
	case <-gone:
		t.Fatal("told after stop")
	case <-time.After(200 * time.Millisecond):
	}
	// A watch of a closed connection is a no-op, not a watch of whatever
	// reuses its descriptor.
	server.Close()
	told := make(chan struct{}, 1)
	stop = WatchClose(server, func() { told <- struct{}{} })
	defer stop()
	_, peer := testutil.TCPPair(t) // may take the closed one's number
	peer.Close()
	select {
	case <-told:
		t.Fatal("told of a closed connection")
	case <-time.After(200 * time.Millisecond):
	}
}
