package wire

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/m0serve/m0/internal/testutil"
	"github.com/valyala/fasthttp"
)

// Bodies set from a buffer the handler reuses arrive whole and as they were
// when set, on one keep-alive connection, in turn and pipelined: a lent
// buffer goes back only once its response is written, and a small body and
// an owned one are sent as they should be.
func TestFastBody(t *testing.T) {
	var scratch []byte // reused by every request, as a Python thread's buffer is
	body := func(n int, c byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = c + byte(i%7)
		}
		return b
	}
	// A buffer that comes back is spoiled at once: one that came back
	// before its response was written would send the spoil.
	lentBack = func(b []byte) {
		for i := range b {
			b[i] = '#'
		}
	}
	defer func() { lentBack = nil }()
	handler := func(ctx *fasthttp.RequestCtx) {
		n, _ := strconv.Atoi(string(ctx.QueryArgs().Peek("n")))
		c := ctx.QueryArgs().Peek("c")[0]
		owned := ctx.QueryArgs().Has("owned")
		if owned {
			FastBody(ctx, body(n, c), true)
			return
		}
		scratch = append(scratch[:0], body(n, c)...)
		FastBody(ctx, scratch, false)
		clear(scratch) // what the caller does with its memory afterwards is its own
		if n > 0 {
			scratch[0] = '!'
		}
	}
	srv, c := testutil.TCPPair(t)
	served := make(chan struct{})
	go func() {
		defer close(served)
		(&fasthttp.Server{Handler: handler}).ServeConn(srv)
	}()
	defer func() { // before lentBack is reset: the server closes its last request's values
		c.Close()
		<-served
	}()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	type ask struct {
		n     int
		c     byte
		owned bool
	}
	asks := []ask{{10, 'a', false}, {keptMax + 1, 'b', false}, {20000, 'c', false}, {keptMax, 'd', false},
		{300000, 'e', false}, {5000, 'f', true}, {0, 'g', false}, {lentMax + 500000, 'h', false}, {9000, 'i', false}}
	request := func(a ask) string {
		q := fmt.Sprintf("/?n=%d&c=%c", a.n, a.c)
		if a.owned {
			q += "&owned"
		}
		return "GET " + q + " HTTP/1.1\r\nHost: x\r\n\r\n"
	}
	check := func(a ask) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if want := body(a.n, a.c); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes of %c: got %d bytes, %q...", a.n, a.c, len(got), got[:min(len(got), 16)])
		}
	}
	for _, a := range asks { // in turn
		io.WriteString(c, request(a))
		check(a)
	}
	var all string // pipelined: every request in one write
	for _, a := range asks {
		all += request(a)
	}
	io.WriteString(c, all)
	for _, a := range asks {
		check(a)
	}
}
