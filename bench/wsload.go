package main

// wsload: the WebSocket echo load, which wrk cannot express. N connections
// are opened first; then each sends a message and waits for its echo, again
// and again, until the duration is over. It prints one JSON object with the
// figures of a Run.

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

func wsloadMain(args []string) error {
	fs := flag.NewFlagSet("wsload", flag.ContinueOnError)
	url := fs.String("url", "", "ws:// URL of an echo endpoint")
	conns := fs.Int("c", 64, "connections")
	d := fs.Duration("d", 10*time.Second, "how long the messages are sent")
	timeout := fs.Duration("timeout", 5*time.Second, "an echo later than this counts as a timeout and ends its connection")
	size := fs.Int("size", 32, "bytes per message")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" || *conns < 1 {
		return errors.New("wsload: -url and -c (1 or more) are needed")
	}
	r := wsload(*url, *conns, *d, *timeout, *size)
	return json.NewEncoder(os.Stdout).Encode(r)
}

func wsload(url string, conns int, d, timeout time.Duration, size int) Run {
	var r Run
	msg := bytes.Repeat([]byte("m"), size)
	dialer := websocket.Dialer{HandshakeTimeout: timeout, ReadBufferSize: 4096, WriteBufferSize: 4096}
	cs := make([]*websocket.Conn, conns)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // handshakes at once: a burst of 1,024 would overflow small backlogs
	for i := range cs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, _, err := dialer.Dial(url, nil)
			if err != nil {
				mu.Lock()
				r.Errors.Connect++
				mu.Unlock()
				return
			}
			cs[i] = c
		}()
	}
	wg.Wait()
	lat := make([][]time.Duration, conns)
	start := time.Now()
	end := start.Add(d)
	for i, c := range cs {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			own := make([]time.Duration, 0, 4096)
			defer func() { lat[i] = own }()
			for time.Now().Before(end) {
				t0 := time.Now()
				c.SetWriteDeadline(t0.Add(timeout))
				if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
					mu.Lock()
					r.Errors.Write++
					mu.Unlock()
					return
				}
				c.SetReadDeadline(t0.Add(timeout))
				kind, got, err := c.ReadMessage()
				if err != nil {
					mu.Lock()
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						r.Errors.Timeout++
					} else {
						r.Errors.Read++
					}
					mu.Unlock()
					return
				}
				if kind != websocket.TextMessage || !bytes.Equal(got, msg) {
					mu.Lock()
					r.Errors.Status++ // not the echo
					mu.Unlock()
					return
				}
				own = append(own, time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	// A connection's last echo can end up to the timeout after the
	// duration: the rate is over the duration, in which every counted echo
	// was sent.
	if elapsed > d {
		elapsed = d
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	r.Requests = int64(len(all))
	r.RPS = float64(len(all)) / elapsed.Seconds()
	if n := len(all); n > 0 {
		q := func(p float64) float64 { return ms(all[int(p*float64(n-1))]) }
		r.P50ms, r.P90ms, r.P99ms, r.Maxms = q(0.50), q(0.90), q(0.99), ms(all[n-1])
	}
	fmt.Fprintf(os.Stderr, "wsload: %d connections (%d failed), %d echoes in %s\n", conns, r.Errors.Connect, len(all), elapsed.Round(time.Millisecond))
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
