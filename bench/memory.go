package main

// Memory per connection: idle connections held open on a settled server,
// its RSS before and after.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// holdConns is how many idle connections the memory figure holds.
const holdConns = 1024

// heldNone is the note of a server that held none of them: every one was
// closed before the settled reading. Earlier harnesses worded it otherwise
// ("holds no idle connection: it closes each after its answer"); the page
// says it this way for all.
const heldNone = "holds no idle connection: it closed them before the settled reading, after its answer or at its keep-alive timeout"

// holdIdle opens n connections to the server, each with one request (or
// one WebSocket echo) answered, holds them idle, and reads the server's
// RSS (every process of its session) before and after, each time after
// the server has settled.
func (h *harness) holdIdle(p *proc, s Suite, app App, url string, n int) Memory {
	settle := 2 * time.Second
	if h.opt.quick {
		settle = 200 * time.Millisecond
	}
	m := holdIdle(s.Tool == "wsload", url, n, settle, func() int64 {
		_, rss := sessionUsage(p.pid())
		return rss
	})
	m.App = app.Name
	return m
}

// holdIdle is n idle connections held on url (WebSockets with ws), and
// what rss says before and after, each read after settle.
func holdIdle(ws bool, url string, n int, settle time.Duration, rss func() int64) Memory {
	m := Memory{Conns: n}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < uint64(n+256) {
		m.Note = fmt.Sprintf("not measured: %d connections need %d open files, the limit is %d", n, n+256, lim.Cur)
		return m
	}
	time.Sleep(settle)
	m.RSSIdleKiB = rss()
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed int
	var firstErr error
	sem := make(chan struct{}, 64)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := openOne(ws, url)
			if err != nil {
				mu.Lock()
				failed++
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	time.Sleep(settle)
	m.RSSHeldKiB = rss()
	for _, c := range conns {
		if c != nil && stillOpen(c) {
			m.Open++
		}
	}
	switch {
	case failed > 0:
		m.Note = fmt.Sprintf("%d of %d connections failed (%v)", failed, n, firstErr)
	case m.Open == 0:
		m.Note = heldNone
	case m.Open < n:
		m.Note = fmt.Sprintf("closed %d of the %d idle connections within %s", n-m.Open, n, settle)
	}
	if m.Open >= n/2 && failed == 0 {
		per := float64(m.RSSHeldKiB-m.RSSIdleKiB) / float64(m.Open)
		m.PerConnKiB = &per
	}
	return m
}

// openOne is one connection with one answer read: an HTTP/1.1 GET kept
// alive, or a WebSocket that echoed one message.
func openOne(ws bool, url string) (net.Conn, error) {
	if ws {
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
		c, _, err := d.Dial("ws"+strings.TrimPrefix(url, "http"), nil)
		if err != nil {
			return nil, err
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := c.WriteMessage(websocket.TextMessage, []byte("held")); err != nil {
			c.Close()
			return nil, err
		}
		if _, _, err := c.ReadMessage(); err != nil {
			c.Close()
			return nil, err
		}
		c.SetReadDeadline(time.Time{})
		return c.UnderlyingConn(), nil
	}
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, err
	}
	c, err := net.DialTimeout("tcp", req.URL.Host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := req.Write(c); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = errors.New("status " + strconv.Itoa(resp.StatusCode))
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// stillOpen is whether the server has not closed c: a read finds nothing
// to read rather than the end.
func stillOpen(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	return errors.Is(err, os.ErrDeadlineExceeded)
}
