package front

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/observe"
)

// TestShutdownAnswersKeptAliveClients: clients that send one request after
// another on kept-alive connections while the server drains get every
// answer, each connection's last with Connection: close; none finds its
// connection closed under a request it sent. A kept-alive connection left
// idle is closed once KeptGrace has passed.
func TestShutdownAnswersKeptAliveClients(t *testing.T) {
	each(t, func(t *testing.T, fe string) {
		var h http.Handler = newEcho()
		if fe == "net/http" {
			h = netOnly{h.(*echo)}
		}
		srv := New(h, Limits{IdleTimeout: 30 * time.Second})
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		addr := ln.Addr().String()

		idle, err := net.Dial("tcp", addr) // one request, then nothing
		if err != nil {
			t.Fatal(err)
		}
		defer idle.Close()
		idleBuf := bufio.NewReader(idle)
		fmt.Fprintf(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if r, err := http.ReadResponse(idleBuf, nil); err != nil {
			t.Fatal(err)
		} else {
			r.Body.Close()
		}
		idleSince := time.Now()
		idleClosed := make(chan time.Duration, 1) // how long after its answer the idle connection closed
		go func() {
			idle.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := idleBuf.ReadByte()
			if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
				idleClosed <- -1
				return
			}
			idleClosed <- time.Since(idleSince)
		}()

		const clients = 8
		var wg sync.WaitGroup
		failures := make(chan string, clients)
		closedBy := make(chan int, clients) // requests answered before Connection: close
		started := make(chan struct{}, clients)
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					failures <- err.Error()
					return
				}
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 1; ; n++ {
					if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
						failures <- fmt.Sprintf("request %d: %v", n, err)
						return
					}
					r, err := http.ReadResponse(br, nil)
					if err != nil {
						failures <- fmt.Sprintf("request %d: %v", n, err)
						return
					}
					r.Body.Close()
					if r.StatusCode != 200 {
						failures <- fmt.Sprintf("request %d: %s", n, r.Status)
					}
					if n == 10 {
						started <- struct{}{}
					}
					if r.Close {
						closedBy <- n
						return
					}
				}
			}()
		}
		for range clients {
			<-started
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		wg.Wait()
		close(failures)
		for f := range failures {
			t.Errorf("a kept-alive client failed: %s", f)
		}
		if len(closedBy) != clients {
			t.Errorf("%d of %d clients were told Connection: close", len(closedBy), clients)
		}
		// The idle connection was closed by the drain, once it had been
		// idle for KeptGrace and not before (a tick of the drain's loop
		// aside).
		switch d := <-idleClosed; {
		case d < 0:
			t.Error("the idle kept-alive connection was not closed by the drain")
		case d < KeptGrace-50*time.Millisecond:
			t.Errorf("the idle kept-alive connection was closed %s after its answer, before KeptGrace (%s)", d, KeptGrace)
		}
	})
}

// refusing is a net/http handler that hears of the requests the server
// refused before it (the access log's and the metrics' contract). The
// server reports a refusal after its answer is written, so a client can
// read the answer before the report: a test waits for it on refused.
type refusing struct {
	refused chan string
}

func (h *refusing) ServeHTTP(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }

func (h *refusing) Refused(method, path string, o observe.Outcome) {
	h.refused <- fmt.Sprintf("%s %s %d", method, path, o.Status)
}

// TestRefusalsReachTheHandler: under net/http, a 413 the server gives
// before the handler reaches the handler's Refused, through the drain's
// wrapper.
func TestRefusalsReachTheHandler(t *testing.T) {
	h := &refusing{refused: make(chan string, 4)}
	srv := New(h, Limits{MaxBody: 10, IdleTimeout: 5 * time.Second})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	resp, err := http.Post("http://"+ln.Addr().String()+"/up", "text/plain", strings.NewReader(strings.Repeat("x", 100)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	select {
	case got := <-h.refused:
		if got != "POST /up 413" {
			t.Errorf("refused %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the 413 was not reported to the handler's Refused")
	}
	// The one refusal is reported once: the server is shut down (its
	// connections closed, every report made) before looking for a second.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	select {
	case got := <-h.refused:
		t.Errorf("a second report: %q", got)
	default:
	}
}
