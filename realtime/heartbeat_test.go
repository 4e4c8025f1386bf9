package realtime

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestHeartbeat: an idle stream is sent a comment every Heartbeat, and a
// frame puts the next one a whole Heartbeat off. The clock is synctest's.
func TestHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(&Options{Heartbeat: 15 * time.Second})
		server, client := net.Pipe()
		start := time.Now()
		go func() {
			defer server.Close()
			h.holdConn(server, server, true, nil, "c", false, "")
		}()
		var mu sync.Mutex
		var got []string // what arrived, with the second it arrived at
		go func() {
			br := bufio.NewReader(client)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				mu.Lock()
				got = append(got, time.Since(start).Round(time.Second).String()+" "+strings.TrimRight(line, "\r\n"))
				mu.Unlock()
			}
		}()
		lines := func() []string {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			var l []string
			for _, s := range got {
				// Only the stream's body: chunk sizes and the head are framing.
				if f := strings.SplitN(s, " ", 2); f[1] == ":" || strings.HasPrefix(f[1], "data: ") {
					l = append(l, s)
				}
			}
			return l
		}
		time.Sleep(40 * time.Second) // heartbeats at 15 s and 30 s
		h.Publish("c", []byte("frame"))
		time.Sleep(20 * time.Second) // the next at 40+15 = 55 s
		// The position's empty data first, at once.
		want := []string{"0s data: ", "15s :", "30s :", "40s data: frame", "55s :"}
		if got := lines(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("got %q, want %q", got, want)
		}
		client.Close()
		synctest.Wait()
		if n := h.Stats().HeldStreams; n != 0 {
			t.Errorf("%d streams held after the client left", n)
		}
	})
}

// TestNoHeartbeat: with NoHeartbeat an idle stream is sent nothing.
func TestNoHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(&Options{Heartbeat: NoHeartbeat})
		server, client := net.Pipe()
		go func() {
			defer server.Close()
			h.holdConn(server, server, false, nil, "c", false, "")
		}()
		n := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			br := bufio.NewReader(client)
			for {
				if _, err := br.ReadString('\n'); err != nil {
					return
				}
				n++
			}
		}()
		synctest.Wait()
		head := n
		time.Sleep(time.Hour)
		synctest.Wait()
		if n != head {
			t.Errorf("%d lines in an hour of silence", n-head)
		}
		client.Close()
		<-done
	})
}
