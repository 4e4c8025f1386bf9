package front

import (
	"context"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// exhausted is a listener whose Accepts fail, as accept4 does out of
// descriptors, while fails is above zero.
type exhausted struct {
	net.Listener
	fails atomic.Int64
}

func (l *exhausted) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptFailuresRetried: a server whose listener fails to accept keeps
// serving once it accepts again (fasthttp's Serve returns on such a
// failure unless the listener retries), and its Shutdown ends an Accept
// waiting to retry.
func TestAcceptFailuresRetried(t *testing.T) {
	each(t, func(t *testing.T, fe string) {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln := &exhausted{Listener: l}
		ln.fails.Store(4)
		lim := Limits{IdleTimeout: 10 * time.Second}
		srv := New(newEcho(), lim)
		if fe == "net/http" {
			srv = New(netOnly{newEcho()}, lim)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		c := dial(t, l.Addr().String())
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
		got := make([]byte, 12)
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "HTTP/1.1 200" {
			t.Fatalf("after 4 failures to accept: %q, %v", got, err)
		}
		select {
		case err := <-served:
			t.Fatalf("Serve returned %v", err)
		default:
		}
		ln.fails.Store(1 << 40) // from now on every Accept fails
		c2 := dial(t, l.Addr().String())
		defer c2.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close()
		if err := srv.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown while Accept retries: %v", err)
		}
		select {
		case <-served:
		case <-ctx.Done():
			t.Fatal("Serve did not return after Shutdown")
		}
	})
}
