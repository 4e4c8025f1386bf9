package wsup

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// frame is a client's frame (masked, with a key of zeros: the payload as
// it is) of opcode op, final when fin.
func frame(fin bool, op byte, payload string) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	if len(payload) > 125 {
		panic("frame: payload too long for a test")
	}
	return append([]byte{b0, 0x80 | byte(len(payload)), 0, 0, 0, 0}, payload...)
}

// TestReadMessage: a text message is delivered when it is UTF-8, whole
// across its fragments (a sequence split between two frames is valid), and
// refused with 1007 when it is not; a binary message is any bytes.
func TestReadMessage(t *testing.T) {
	const text, binary, cont = 1, 2, 0
	for _, c := range []struct {
		name   string
		frames [][]byte
		mt     int
		data   string
		code   int // the close an invalid message is answered with; 0 for none
	}{
		{"text", [][]byte{frame(true, text, "caf\xc3\xa9")}, websocket.TextMessage, "caf\u00e9", 0},
		{"empty text", [][]byte{frame(true, text, "")}, websocket.TextMessage, "", 0},
		{"binary, not UTF-8", [][]byte{frame(true, binary, "\xff\xfe")}, websocket.BinaryMessage, "\xff\xfe", 0},
		{"text, not UTF-8", [][]byte{frame(true, text, "ok \xff")}, websocket.TextMessage, "", 1007},
		{"overlong", [][]byte{frame(true, text, "\xc0\xaf")}, websocket.TextMessage, "", 1007},
		{"surrogate", [][]byte{frame(true, text, "\xed\xa0\x80")}, websocket.TextMessage, "", 1007},
		{"truncated at the end", [][]byte{frame(true, text, "caf\xc3")}, websocket.TextMessage, "", 1007},
		{"split across fragments", [][]byte{frame(false, text, "caf\xc3"), frame(false, cont, ""), frame(true, cont, "\xa9!")},
			websocket.TextMessage, "caf\u00e9!", 0},
		{"invalid across fragments", [][]byte{frame(false, text, "caf\xc3"), frame(true, cont, "(")},
			websocket.TextMessage, "", 1007},
		{"invalid in a later fragment", [][]byte{frame(false, text, "fine"), frame(true, cont, "\xf8\x88\x80\x80\x80")},
			websocket.TextMessage, "", 1007},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			type result struct {
				mt   int
				data []byte
				err  error
			}
			got := make(chan result, 1)
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, err := Upgrader.Upgrade(w, r, nil)
				if err != nil {
					got <- result{err: err}
					return
				}
				defer conn.Close()
				mt, data, err := ReadMessage(conn)
				got <- result{mt, data, err}
			}))
			defer s.Close()
			client, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.URL, "http"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			for _, f := range c.frames {
				if _, err := client.NetConn().Write(f); err != nil {
					t.Fatal(err)
				}
			}
			var r result
			select {
			case r = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("no message read")
			}
			var bad *InvalidMessage
			switch {
			case c.code != 0:
				if !errors.As(r.err, &bad) || bad.Code != c.code || r.data != nil {
					t.Fatalf("ReadMessage: %d %q %v, want an *InvalidMessage with %d and no data", r.mt, r.data, r.err, c.code)
				}
				if !strings.HasPrefix(bad.Error(), "wsup: ") || bad.Reason == "" {
					t.Errorf("the refusal reads %q, reason %q", bad.Error(), bad.Reason)
				}
			case r.err != nil || r.mt != c.mt || string(r.data) != c.data:
				t.Fatalf("ReadMessage: %d %q %v, want %d %q", r.mt, r.data, r.err, c.mt, c.data)
			}
		})
	}
}
