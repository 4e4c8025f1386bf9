package strict

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestConnHold: a read after an upgrade request waits for its answer
// without reading the socket, and ends at its read deadline.
func TestConnHold(t *testing.T) {
	client, server := net.Pipe()
	sc := &Conn{Conn: server}
	go client.Write([]byte("GET /up HTTP/1.1\r\nHost: x\r\nUpgrade: a\r\nConnection: upgrade\r\n\r\n"))
	buf := make([]byte, 4096)
	if n, err := sc.Read(buf); err != nil || !bytes.HasPrefix(buf[:n], []byte("GET /up")) {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := sc.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("held read: %v, want the deadline", err)
	}
	sc.SetReadDeadline(time.Time{})
	go func() {
		sc.Write([]byte("HTTP/1.1 101 Switching Protocols\r\n\r\n"))
		client.Write([]byte("raw\n"))
	}()
	go io.Copy(io.Discard, client)
	if n, err := sc.Read(buf); err != nil || string(buf[:n]) != "raw\n" {
		t.Fatalf("after the switch read %q %v", buf[:n], err)
	}
}

// TestConnHeadSince: an unfinished head is marked from its first bytes,
// more of it leaves the mark, a whole one passed clears it, and the rest
// of a read that begins the next head marks that afresh.
func TestConnHeadSince(t *testing.T) {
	client, server := net.Pipe()
	sc := &Conn{Conn: server}
	if sc.HeadSince() != 0 {
		t.Fatal("marked before any byte")
	}
	// part writes b, which a Read held by sc takes, then ends that Read:
	// a net.Pipe write returns once its bytes are read.
	part := func(b string) {
		go func() {
			client.Write([]byte(b))
			sc.SetReadDeadline(time.Now())
		}()
		if _, err := sc.Read(make([]byte, 4096)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("unfinished head read: %v, want the deadline", err)
		}
		sc.SetReadDeadline(time.Time{})
	}
	part("GET /a HTTP/1.1\r\n")
	first := sc.HeadSince()
	if first == 0 {
		t.Fatal("an unfinished head is not marked")
	}
	part("Host: x\r\n")
	if again := sc.HeadSince(); again != first {
		t.Fatalf("more of the head moved its mark from %d to %d", first, again)
	}
	buf := make([]byte, 4096)
	go client.Write([]byte("\r\nGET /b HT"))
	if n, err := sc.Read(buf); err != nil || string(buf[:n]) != "GET /a HTTP/1.1\r\nHost: x\r\n\r\n" {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	if next := sc.HeadSince(); next <= first {
		t.Fatalf("the next head's mark %d, want after the first's %d", next, first)
	}
	go client.Write([]byte("TP/1.1\r\nHost: x\r\n\r\n"))
	if n, err := sc.Read(buf); err != nil || string(buf[:n]) != "GET /b HTTP/1.1\r\nHost: x\r\n\r\n" {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	if sc.HeadSince() != 0 {
		t.Fatal("still marked with nothing held")
	}
}

// TestConn reads a refused pipeline through a Conn: the good
// request, then the one for RefusedTarget, then the end.
func TestConn(t *testing.T) {
	client, server := net.Pipe()
	sc := &Conn{Conn: server}
	go func() {
		for _, b := range []string{"GET /a HTTP/1.1\r\nHo", "st: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n"} {
			client.Write([]byte(b))
		}
		client.Close()
	}()
	got, err := io.ReadAll(sc)
	if err != nil {
		t.Fatal(err)
	}
	want := "GET /a HTTP/1.1\r\nHost: x\r\n\r\n" + string(refusedHead)
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
	if r := Refused(sc, []byte(RefusedTarget)); r == nil || r.Status != 400 || r.Target != "/b" {
		t.Fatalf("refusal %+v", r)
	}
	if Refused(sc, []byte("/a")) != nil {
		t.Fatal("a request for another target is not the refused one")
	}
}

// TestConnDrops: a read whose bytes are all dropped (a chunk's
// extensions, a trailer field) is not handed on as an empty read; the
// front end reads the rest.
func TestConnDrops(t *testing.T) {
	client, server := net.Pipe()
	sc := &Conn{Conn: server}
	head := "POST /a#b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	go func() {
		for _, b := range []string{head, "5", ";a=b", "\r\nhello\r\n0\r\n", "X-T: 1\r\n", "\r\n"} {
			client.Write([]byte(b))
		}
		client.Close()
	}()
	got, err := io.ReadAll(sc)
	want := "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
	if err != nil || string(got) != want {
		t.Fatalf("read %q (%v), want %q", got, err, want)
	}
}
