package realtime

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// readBoth parses a request head as each front end reads it: nr is nil
// when net/http's server would refuse it, fr when fasthttp would.
func readBoth(head string) (nr *http.Request, fr *fasthttp.Request) {
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
	if err == nil && netServerTakes(r) {
		nr = r
	}
	fr = &fasthttp.Request{}
	if err := fr.Read(bufio.NewReader(strings.NewReader(head))); err != nil {
		fr = nil
	}
	return nr, fr
}

// netServerTakes reports whether net/http's server takes a request
// http.ReadRequest read: HTTP/1.x, a valid Host, header names that are
// tokens, and values without control bytes (the checks of its
// conn.readRequest; the heads given here all carry a Host line).
func netServerTakes(r *http.Request) bool {
	if r.ProtoMajor != 1 {
		return false
	}
	for _, c := range []byte(r.Host) {
		if !validHostByte(c) {
			return false
		}
	}
	for name, values := range r.Header {
		if name == "" {
			return false
		}
		for _, c := range []byte(name) {
			if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
				return false
			}
		}
		for _, v := range values {
			for _, c := range []byte(v) {
				if c < ' ' && c != '\t' || c == 0x7f {
					return false
				}
			}
		}
	}
	return true
}

func validHostByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!$%&'()*+,-.:;=[]_~", c) >= 0
}

// FuzzLastEventID: whatever Last-Event-ID lines a request carries, both
// front ends read the same id from it (or none), and the m0-gap event a
// stream sends for an id that is not ours is one SSE event that carries
// the id back.
func FuzzLastEventID(f *testing.F) {
	for _, s := range []string{
		"Last-Event-ID: mfz3k2a0-42\r\n",
		"Last-Event-ID:\r\n",
		"last-event-id:  1-1  \r\n",
		"Last-Event-ID: a\r\nLast-Event-ID: b\r\n",
		"Last-Event-ID: \r\nLast-Event-ID: 2-2\r\n",
		"Last-Event-Id: x\ty\r\n",
		"Last-Event-ID: caf\xc3\xa9\r\n",
		"Last-Event-ID: \"}\\n\r\n",
		"Last_Event_ID: 1-1\r\n",
		"Last-Event-ID : 1-1\r\n",
		"Last-Event-ID: a\r\n b\r\n",
	} {
		f.Add(s)
	}
	h := New(&Options{ReplayFrames: 4})
	for range 3 {
		h.Publish("room", []byte("x"))
	}
	f.Fuzz(func(t *testing.T, lines string) {
		nr, fr := readBoth("GET /s HTTP/1.1\r\nHost: x\r\n" + lines + "\r\n")
		if nr == nil || fr == nil {
			return
		}
		id, resume := lastEventID(nr.Header)
		fid, fresume := fastLastEventID(&fr.Header)
		if id != fid || resume != fresume {
			t.Fatalf("net/http reads Last-Event-ID %q, %v; fasthttp %q, %v", id, resume, fid, fresume)
		}
		if resume != (id != "") {
			t.Fatalf("resume %v with id %q", resume, id)
		}
		s, err := h.Subscribe("room", resume, id)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.Gap == nil {
			if _, ok := ParseID(id); !ok && resume {
				t.Fatalf("Last-Event-ID %q, not ours, was taken", id)
			}
			return
		}
		ev := readEvents(t, appendGap(nil, s.Gap))
		if len(ev) != 1 || ev[0].event != GapEvent {
			t.Fatalf("the gap for %q is %d events: %+v", id, len(ev), ev)
		}
		var d gapData
		if err := json.Unmarshal([]byte(ev[0].data), &d); err != nil {
			t.Fatalf("the gap for %q: %v in %q", id, err, ev[0].data)
		}
		if utf8.ValidString(id) && d.LastEventID != id || d.NewestID != h.Newest().String() {
			t.Fatalf("the gap for %q says %+v", id, d)
		}
	})
}

// sseEvent is one event as an EventSource dispatches it.
type sseEvent struct {
	id, event, data string
	hasID           bool
}

// readEvents reads a stream as the HTML standard's EventSource does
// (9.2.6, "Interpreting an event stream"): lines end at CR, LF or CRLF, a
// blank line dispatches, "data" lines are joined with LF.
func readEvents(t *testing.T, b []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	var data []string
	hasData := false
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			t.Fatalf("a stream that ends inside a line: %q", b)
		}
		line := string(b[:i])
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
		if line == "" {
			if hasData {
				cur.data = strings.Join(data, "\n")
				out = append(out, cur)
			}
			cur, data, hasData = sseEvent{}, nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			cur.id, cur.hasID = value, true
		case "event":
			cur.event = value
		case "data":
			data, hasData = append(data, value), true
		}
	}
	if hasData || cur.hasID || cur.event != "" {
		t.Fatalf("an event that no blank line ends: %+v %q", cur, data)
	}
	return out
}

// FuzzAppendEvent: a frame of any bytes is sent as one event that an
// EventSource reads back whole, its line ends (CR, LF, CRLF) as LF.
func FuzzAppendEvent(f *testing.F) {
	f.Add("mfz3k2a0-42", "", []byte("hello"))
	f.Add("", PositionEvent, []byte{})
	f.Add("1-1", GapEvent, []byte("a\r\nb\rc\nd\n"))
	f.Add("", "", []byte("\r\r\n\n:x\ndata: y"))
	f.Fuzz(func(t *testing.T, id, event string, data []byte) {
		if strings.ContainsAny(id+event, "\r\n") || strings.ContainsRune(id, 0) {
			return // ids and types are the server's own: ParseID's and the constants
		}
		ev := readEvents(t, appendEvent(nil, id, event, data))
		want := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(data))
		if len(ev) != 1 || ev[0].data != want || ev[0].event != event || ev[0].id != id || ev[0].hasID != (id != "") {
			t.Fatalf("appendEvent(%q, %q, %q) reads as %+v", id, event, data, ev)
		}
	})
}

// FuzzGrantFrontEnds: a request to a hold mount gets the same verdict
// under both front ends: the same channel, or the same refusal, whatever
// its query and its cookies.
func FuzzGrantFrontEnds(f *testing.F) {
	k := &GrantKeys{Key: []byte(strings.Repeat("k", 32))}
	now := time.Unix(1_800_000_000, 0)
	exp := now.Add(time.Minute)
	f.Add(k.Sign("/live", "room", exp, false, ""), "")
	f.Add(k.Sign("/live", "room", exp, true, "abc"), "sessionid=abc")
	f.Add(k.Sign("/live", "room", exp, true, "abc"), `sessionid="abc"`)
	f.Add(k.Sign("/live", "room", exp, true, "abc"), "a=1; sessionid=abc; sessionid=def")
	f.Add(k.Sign("/live", "room", exp, true, "abc"), " sessionid = abc ")
	f.Add(k.Sign("/live", "room", exp, true, "caf\u00e9"), "sessionid=caf\u00e9")
	f.Add(k.Sign("/live", "r m", exp, false, ""), "")
	f.Add("ch=room&exp=1&ses=0&sig=;", "")
	f.Add(k.Sign("/live", "room", exp, false, "")+"#x", "")
	f.Fuzz(func(t *testing.T, query, cookie string) {
		head := "GET /live?" + query + " HTTP/1.1\r\nHost: x\r\n"
		if cookie != "" {
			head += "Cookie: " + cookie + "\r\n"
		}
		nr, fr := readBoth(head + "\r\n")
		if nr == nil || fr == nil {
			return
		}
		ch, err := k.Verify(nr, "/live", now)
		fch, ferr := k.verifyFast(fr, "/live", now)
		if ch != fch || err != ferr {
			t.Fatalf("net/http: %q, %v; fasthttp: %q, %v", ch, err, fch, ferr)
		}
	})
}
