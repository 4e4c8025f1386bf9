package realtime_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/m0serve/m0/internal/testutil"
	"github.com/m0serve/m0/realtime"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// app is the handler under the holds: /events and /ws approve holds of
// the channel in ?c=, /ws/message records what it is posted, /echo-m0
// answers the M0-* headers it was given, /bad-* answer holds wrongly.
type app struct {
	mu    sync.Mutex
	posts []post
}

type post struct {
	channel, slot, opcode, ctype, cookie, body string
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	switch r.URL.Path {
	case "/events", "/ws":
		h.Set("Set-Cookie", "seen=1")
		h.Set("X-Custom", "kept")
		h.Set("Content-Type", "text/html") // the stream's own replaces it
		h.Set(realtime.HeaderHold, map[string]string{"/events": "stream", "/ws": "websocket"}[r.URL.Path])
		h.Set(realtime.HeaderChannel, r.URL.Query().Get("c"))
		io.WriteString(w, "this body is not sent")
	case realtime.MessagePath:
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.posts = append(a.posts, post{r.Header.Get(realtime.HeaderChannel), r.Header.Get(realtime.HeaderSlot),
			r.Header.Get(realtime.HeaderOpcode), r.Header.Get("Content-Type"), r.Header.Get("Cookie"), string(body)})
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case "/echo-m0":
		var got []string
		for k, v := range r.Header {
			if strings.HasPrefix(strings.ToUpper(k), "M0-") {
				got = append(got, k+"="+strings.Join(v, ","))
			}
		}
		fmt.Fprintf(w, "%q", got)
	case "/bad-channel":
		h.Set(realtime.HeaderHold, "stream")
		h.Set(realtime.HeaderChannel, "\x01reserved")
	case "/bad-kind":
		h.Set(realtime.HeaderHold, "forever")
		h.Set(realtime.HeaderChannel, "room")
	case "/unicode-kind": // "ſtream": stream in Unicode's folding, not HTTP's
		h.Set(realtime.HeaderHold, "\u017ftream")
		h.Set(realtime.HeaderChannel, "room")
	case "/bad-status":
		h.Set(realtime.HeaderHold, "stream")
		h.Set(realtime.HeaderChannel, "room")
		w.WriteHeader(http.StatusNotFound)
	case "/bad-ws":
		h.Set(realtime.HeaderHold, "websocket")
		h.Set(realtime.HeaderChannel, "room")
	default:
		io.WriteString(w, "plain")
	}
}

// ServeFastHTTP serves fasthttp with the same handler, as the bridges do.
func (a *app) ServeFastHTTP(ctx *fasthttp.RequestCtx) { fasthttpadaptor.NewFastHTTPHandler(a)(ctx) }

func (a *app) Posts() []post {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]post(nil), a.posts...)
}

type fixture struct {
	hub  *realtime.Hub
	app  *app
	logs *testutil.LockedBuffer
	base map[string]string // by front end
}

// frontends: "fasthttp, kept" is a fasthttp.Server that keeps hijacked
// connections (as m0serve's), told to the holds.
var frontends = []string{"net/http", "fasthttp", "fasthttp, kept"}

// serve starts a hub with opts (Logger set to the fixture's), and the
// holds around app under both front ends.
func serve(t *testing.T, opts *realtime.Options) *fixture {
	t.Helper()
	f := &fixture{app: &app{}, logs: &testutil.LockedBuffer{}, base: map[string]string{}}
	if opts == nil {
		opts = realtime.DefaultOptions()
	}
	opts.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	f.hub = realtime.New(opts)
	h := realtime.Holds(f.hub, nil)(f.app)
	ns := httptest.NewServer(h)
	t.Cleanup(ns.Close)
	f.base["net/http"] = ns.URL
	kept := realtime.Holds(f.hub, &realtime.HoldOptions{KeepHijackedConns: true})(f.app)
	for fe, h := range map[string]http.Handler{"fasthttp": h, "fasthttp, kept": kept} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		fh, ok := h.(interface{ ServeFastHTTP(*fasthttp.RequestCtx) })
		if !ok {
			t.Fatal("Holds around a fasthttp handler is not one")
		}
		fs := &fasthttp.Server{Handler: fh.ServeFastHTTP, KeepHijackedConns: h == kept}
		go fs.Serve(ln)
		t.Cleanup(func() { fs.Shutdown() })
		f.base[fe] = "http://" + ln.Addr().String()
	}
	return f
}

func (f *fixture) each(t *testing.T, fn func(t *testing.T, base string)) {
	for _, fe := range frontends {
		t.Run(fe, func(t *testing.T) { fn(t, f.base[fe]) })
	}
}

// event is one SSE event as a client parses it (comments kept apart).
type event struct {
	id, event, data, retry string
	comment                bool
}

// sseReader reads a stream's events, comments and retry fields as sent.
type sseReader struct {
	resp      *http.Response
	br        *bufio.Reader
	last      string   // the last id field read, as a browser keeps its last event id
	positions []string // the ids of the position events, which next skips
}

// getStream sends a GET for an event stream, presenting lastID when it is
// not empty, with hdr besides; the body is closed when the test ends.
func getStream(t *testing.T, url, lastID string, hdr http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func openSSE(t *testing.T, url string, lastID string) *sseReader {
	t.Helper()
	resp := getStream(t, url, lastID, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, resp.Header)
	}
	return &sseReader{resp: resp, br: bufio.NewReader(resp.Body)}
}

// next returns the next event or comment, or an error at the end.
func (r *sseReader) next() (event, error) {
	var e event
	var data []string
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return e, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if e.id != "" {
				r.last = e.id
			}
			if e.event == realtime.PositionEvent {
				if len(data) != 1 || data[0] != "" {
					return e, fmt.Errorf("a position with data %q", data)
				}
				r.positions = append(r.positions, e.id)
				e, data = event{}, nil
				continue
			}
			if data != nil || e.retry != "" || e.comment {
				e.data = strings.Join(data, "\n")
				return e, nil
			}
			e = event{}
		case strings.HasPrefix(line, ":"):
			e.comment = true
		case strings.HasPrefix(line, "id: "):
			e.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			e.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[6:])
		case strings.HasPrefix(line, "retry: "):
			e.retry = line[7:]
		}
	}
}

func (r *sseReader) mustNext(t *testing.T) event {
	t.Helper()
	type res struct {
		e   event
		err error
	}
	c := make(chan res, 1)
	go func() { e, err := r.next(); c <- res{e, err} }()
	select {
	case x := <-c:
		if x.err != nil {
			t.Fatalf("the stream ended: %v", x.err)
		}
		return x.e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return event{}
}

func TestHoldStream(t *testing.T) {
	f := serve(t, nil)
	f.each(t, func(t *testing.T, base string) {
		channel := "room-" + strings.ReplaceAll(base[7:], ":", "-")
		s := openSSE(t, base+"/events?c="+channel, "")
		h := s.resp.Header
		if h.Get("Cache-Control") != "no-cache" || h.Get("X-Accel-Buffering") != "no" || h.Get("X-Custom") != "kept" ||
			h.Get("Set-Cookie") != "seen=1" || h.Get(realtime.HeaderHold) != "" || h.Get(realtime.HeaderChannel) != "" {
			t.Errorf("head %v", h)
		}
		if len(s.resp.TransferEncoding) == 0 || s.resp.TransferEncoding[0] != "chunked" {
			t.Errorf("an HTTP/1.1 stream is chunked: %v", s.resp.TransferEncoding)
		}
		// It begins where the hub stands: the newest id as a position.
		start := f.hub.Newest().String()
		var ids []string
		for _, d := range []string{"one", "two\nlines", "three"} {
			id, ok := f.hub.Publish(channel, []byte(d))
			if !ok {
				t.Fatal("refused")
			}
			ids = append(ids, id.String())
			e := s.mustNext(t)
			if e.id != id.String() || e.data != d || e.event != "" {
				t.Errorf("got %+v, want id %s data %q", e, id, d)
			}
		}
		if !slices.Equal(s.positions, []string{start}) {
			t.Errorf("positions %q, want %q", s.positions, start)
		}
		s.resp.Body.Close()

		// A reconnect with the first id gets the two after it, then live.
		s = openSSE(t, base+"/events?c="+channel, ids[0])
		for i, want := range []string{"two\nlines", "three"} {
			if e := s.mustNext(t); e.id != ids[i+1] || e.data != want {
				t.Errorf("replayed %+v, want %s %q", e, ids[i+1], want)
			}
		}
		id, _ := f.hub.Publish(channel, []byte("four"))
		if e := s.mustNext(t); e.id != id.String() || e.data != "four" {
			t.Errorf("live after the replay: %+v", e)
		}
		if len(s.positions) != 0 {
			t.Errorf("a replay's frames say where the client stands; got positions %q", s.positions)
		}
		s.resp.Body.Close()

		// An id of no run of this server gets the gap, then live.
		for _, presented := range []string{"garbage", "1-3", strings.Split(id.String(), "-")[0] + "-999999"} {
			s = openSSE(t, base+"/events?c="+channel, presented)
			e := s.mustNext(t)
			want := fmt.Sprintf(`{"last_event_id":%q,"newest_id":%q}`, presented, f.hub.Newest().String())
			if e.event != realtime.GapEvent || e.id != "" || e.data != want {
				t.Errorf("presented %q: got %+v, want the gap %s", presented, e, want)
			}
			newest := f.hub.Newest().String()
			id, _ = f.hub.Publish(channel, []byte("five"))
			if e := s.mustNext(t); e.id != id.String() || e.data != "five" {
				t.Errorf("live after the gap: %+v", e)
			}
			// After the gap the client stands at the newest id: its next
			// reconnect is not another gap.
			if !slices.Equal(s.positions, []string{newest}) {
				t.Errorf("positions after the gap %q, want %q", s.positions, newest)
			}
			s.resp.Body.Close()
		}
	})
}

// TestHoldStreamHTTP10: an HTTP/1.0 client's stream ends by closing, and
// is not chunked.
func TestHoldStreamHTTP10(t *testing.T) {
	f := serve(t, nil)
	f.each(t, func(t *testing.T, base string) {
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET /events?c=old HTTP/1.0\r\nAccept: text/event-stream\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || len(resp.TransferEncoding) != 0 || resp.ContentLength != -1 {
			t.Fatalf("%d %v %d", resp.StatusCode, resp.TransferEncoding, resp.ContentLength)
		}
		waitFor(t, func() bool { return f.hub.Stats().HeldStreams == 1 }, "the stream to be held")
		id, _ := f.hub.Publish("old", []byte("x"))
		// The position where the stream began, then the frame.
		before := realtime.ID{Epoch: id.Epoch, Seq: id.Seq - 1}
		want := []string{"id: " + before.String() + "\n", "event: m0-position\n", "data: \n", "\n",
			"id: " + id.String() + "\n", "data: x\n"}
		var lines []string
		for len(lines) < len(want) {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
		if !slices.Equal(lines, want) {
			t.Errorf("read %q, want %q", lines, want)
		}
		c.Close()
		waitFor(t, func() bool { return f.hub.Stats().HeldStreams == 0 }, "the stream to be let go")
	})
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStripsM0Headers(t *testing.T) {
	f := serve(t, nil)
	f.each(t, func(t *testing.T, base string) {
		req, _ := http.NewRequest("GET", base+"/echo-m0", nil)
		req.Header.Set("M0-Hold", "stream")
		req.Header.Set("m0-channel", "x")
		req.Header.Set("M0-Anything", "y")
		req.Header.Set("X-Kept", "z")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "[]" {
			t.Errorf("the application saw M0-* headers: %s", body)
		}
	})
}

func TestHoldRefused(t *testing.T) {
	f := serve(t, nil)
	f.each(t, func(t *testing.T, base string) {
		for _, c := range []struct{ path, why string }{
			{"/bad-channel", "is not a channel name"},
			{"/bad-kind", "M0-Hold is stream or websocket"},
			{"/unicode-kind", "M0-Hold is stream or websocket, not"},
			{"/bad-status", "status 200"},
			{"/bad-ws", "answers a WebSocket upgrade request"},
		} {
			resp, err := http.Get(base + c.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 500 || string(body) != "Internal Server Error\n" || resp.Header.Get(realtime.HeaderHold) != "" {
				t.Errorf("%s: %d %q %v", c.path, resp.StatusCode, body, resp.Header)
			}
			if !strings.Contains(f.logs.String(), c.why) {
				t.Errorf("%s: no log line saying %q: %s", c.path, c.why, f.logs.String())
			}
		}
		if resp, err := http.Get(base + "/plain"); err != nil || resp.StatusCode != 200 {
			t.Errorf("still serving: %v %v", resp, err)
		}
	})
}

func dialWS(t *testing.T, base, path string, hdr http.Header) (*websocket.Conn, *http.Response) {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+path, hdr)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, resp
}

func TestHoldWebSocket(t *testing.T) {
	f := serve(t, nil)
	f.each(t, func(t *testing.T, base string) {
		channel := "ws-" + strings.ReplaceAll(base[7:], ":", "-")
		hdr := http.Header{"Cookie": {"sessionid=abc"}, "M0-Channel": {"forged"}}
		conn, resp := dialWS(t, base, "/ws?c="+channel, hdr)
		if resp.Header.Get("Set-Cookie") != "seen=1" || resp.Header.Get("X-Custom") != "kept" || resp.Header.Get(realtime.HeaderHold) != "" {
			t.Errorf("handshake head %v", resp.Header)
		}
		waitFor(t, func() bool { return f.hub.Stats().HeldWebSockets >= 1 }, "the socket to be held")
		f.hub.Publish(channel, []byte("text frame"))
		f.hub.Publish(channel, []byte{0xff, 0x00, 0x01})
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for _, want := range []struct {
			mt   int
			data string
		}{{websocket.TextMessage, "text frame"}, {websocket.BinaryMessage, "\xff\x00\x01"}} {
			mt, data, err := conn.ReadMessage()
			if err != nil || mt != want.mt || string(data) != want.data {
				t.Errorf("read %d %q %v, want %d %q", mt, data, err, want.mt, want.data)
			}
		}
		before := len(f.app.Posts())
		conn.WriteMessage(websocket.TextMessage, []byte("hello"))
		conn.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3})
		waitFor(t, func() bool { return len(f.app.Posts()) == before+2 }, "two posts")
		posts := f.app.Posts()[before:]
		if posts[0].slot == "" || posts[0].slot != posts[1].slot {
			t.Errorf("slots %q %q", posts[0].slot, posts[1].slot)
		}
		want := []post{
			{channel, posts[0].slot, "1", "text/plain; charset=utf-8", "sessionid=abc", "hello"},
			{channel, posts[0].slot, "2", "application/octet-stream", "sessionid=abc", "\x01\x02\x03"},
		}
		for i := range want {
			if posts[i] != want[i] {
				t.Errorf("post %d: %+v, want %+v", i, posts[i], want[i])
			}
		}
		conn.Close()
		waitFor(t, func() bool { return f.hub.Stats().HeldWebSockets == 0 }, "the socket to be let go")
	})
}

// TestHoldWebSocketUTF8: a held socket's text message is posted whole
// when it is UTF-8, a sequence split across its fragments included; one
// that is not fails the connection with 1007 (RFC 6455 8.1), and nothing
// of it is posted.
func TestHoldWebSocketUTF8(t *testing.T) {
	f := serve(t, nil)
	// frame is a client's frame, masked with a key of zeros.
	frame := func(fin bool, op byte, payload string) []byte {
		if fin {
			op |= 0x80
		}
		return append([]byte{op, 0x80 | byte(len(payload)), 0, 0, 0, 0}, payload...)
	}
	f.each(t, func(t *testing.T, base string) {
		channel := "utf8-" + strings.ReplaceAll(base[7:], ":", "-")
		for _, c := range []struct {
			name   string
			frames []byte
			posted string // the body posted; "" for a message refused
		}{
			{"split across fragments", slices.Concat(frame(false, 1, "caf\xc3"), frame(true, 0, "\xa9")), "caf\u00e9"},
			{"not UTF-8", frame(true, 1, "caf\xe9"), ""},
			{"not UTF-8 once assembled", slices.Concat(frame(false, 1, "ok"), frame(true, 0, "\xc3(")), ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				conn, _ := dialWS(t, base, "/ws?c="+channel, nil)
				waitFor(t, func() bool { return f.hub.Stats().HeldWebSockets >= 1 }, "the socket to be held")
				before := len(f.app.Posts())
				if _, err := conn.NetConn().Write(c.frames); err != nil {
					t.Fatal(err)
				}
				if c.posted != "" {
					waitFor(t, func() bool { return len(f.app.Posts()) == before+1 }, "a post")
					if p := f.app.Posts()[before]; p.body != c.posted || p.opcode != "1" {
						t.Errorf("posted %+v, want %q", p, c.posted)
					}
					conn.Close()
				} else {
					conn.SetReadDeadline(time.Now().Add(10 * time.Second))
					_, _, err := conn.ReadMessage()
					if !websocket.IsCloseError(err, websocket.CloseInvalidFramePayloadData) {
						t.Fatalf("read %v, want a close with 1007", err)
					}
				}
				waitFor(t, func() bool { return f.hub.Stats().HeldWebSockets == 0 }, "the socket to be let go")
				if n := len(f.app.Posts()) - before; c.posted == "" && n != 0 {
					t.Errorf("%d posts of a message refused: %+v", n, f.app.Posts()[before:])
				}
			})
		}
	})
}

// TestDrain: a drain ends held streams with a retry and sockets with 1001;
// an EventSource that reconnects meanwhile is sent a retry, never an
// answer that makes it give up, and the application is not asked.
func TestDrain(t *testing.T) {
	f := serve(t, nil)
	var streams []*sseReader
	var sockets []*websocket.Conn
	for _, fe := range frontends {
		streams = append(streams, openSSE(t, f.base[fe]+"/events?c=d", ""))
		c, _ := dialWS(t, f.base[fe], "/ws?c=d", nil)
		sockets = append(sockets, c)
	}
	n := int64(len(frontends))
	waitFor(t, func() bool { st := f.hub.Stats(); return st.HeldStreams == n && st.HeldWebSockets == n }, "the holds")
	f.hub.Drain()
	for i, s := range streams {
		e := s.mustNext(t)
		if n, err := strconv.Atoi(e.retry); err != nil || n < 1000 || n > 5000 {
			t.Errorf("%s: the drain sent %+v, want a retry of 1 to 5 s", frontends[i], e)
		}
		if _, err := s.next(); err != io.EOF {
			t.Errorf("%s: after the retry: %v, want the end of the stream", frontends[i], err)
		}
	}
	for i, c := range sockets {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := c.ReadMessage()
		if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Errorf("%s: the socket ended with %v, want 1001", frontends[i], err)
		}
	}
	f.each(t, func(t *testing.T, base string) {
		s := openSSE(t, base+"/anything", "1-1")
		e := s.mustNext(t)
		if e.retry == "" {
			t.Errorf("a reconnect during the drain got %+v", e)
		}
		if _, err := s.next(); err != io.EOF {
			t.Errorf("after the retry: %v", err)
		}
	})
}

// TestLongReplay: a replay larger than one write arrives whole, in order,
// then the live feed, and the position comes after it only when the
// client presented no id.
func TestLongReplay(t *testing.T) {
	f := serve(t, &realtime.Options{ReplayFrames: 4096, Queue: 64})
	f.each(t, func(t *testing.T, base string) {
		channel := "long-" + strings.ReplaceAll(base[7:], ":", "-")
		var ids []string
		for i := range 3000 {
			id, _ := f.hub.Publish(channel, []byte(fmt.Sprintf("%04d%s", i, strings.Repeat("x", 96))))
			ids = append(ids, id.String())
		}
		s := openSSE(t, base+"/events?c="+channel, ids[0])
		for i := 1; i < len(ids); i++ {
			e := s.mustNext(t)
			if e.id != ids[i] || !strings.HasPrefix(e.data, fmt.Sprintf("%04d", i)) {
				t.Fatalf("replayed %d: %+v, want %s", i, e.id, ids[i])
			}
		}
		live, _ := f.hub.Publish(channel, []byte("live"))
		if e := s.mustNext(t); e.id != live.String() || e.data != "live" {
			t.Errorf("after the replay: %+v", e)
		}
		if len(s.positions) != 0 {
			t.Errorf("positions %q after a replay", s.positions)
		}
	})
}

// TestHoldMount: a signed stream URL is held without the application; a
// refused grant is a 403 and one log line; the mount's other paths 404.
func TestHoldMount(t *testing.T) {
	logs := &testutil.LockedBuffer{}
	hub := realtime.New(&realtime.Options{ReplayFrames: 64, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	keys := realtime.GrantKeys{Key: []byte(strings.Repeat("k", 32))}
	now := time.Now()
	mount := hub.HoldMount("/live", &realtime.MountOptions{Keys: keys, KeepHijackedConns: true})
	ns := httptest.NewServer(mount)
	t.Cleanup(ns.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := &fasthttp.Server{Handler: mount.(interface{ ServeFastHTTP(*fasthttp.RequestCtx) }).ServeFastHTTP, KeepHijackedConns: true}
	go fs.Serve(ln)
	t.Cleanup(func() { fs.Shutdown() })
	for _, base := range []string{ns.URL, "http://" + ln.Addr().String()} {
		channel := "mount-" + strings.ReplaceAll(base[7:], ":", "-")
		grant := keys.Sign("/live", channel, now.Add(time.Minute), true, "alice")
		get := func(target, lastID string) *http.Response {
			return getStream(t, base+target, lastID, http.Header{"Cookie": {"sessionid=alice"}})
		}
		resp := get("/live?"+grant, "")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s: a granted stream: %d %v", base, resp.StatusCode, resp.Header)
		}
		s := &sseReader{resp: resp, br: bufio.NewReader(resp.Body)}
		waitFor(t, func() bool { return hub.Stats().HeldStreams == 1 }, "the stream to be held")
		first, _ := hub.Publish(channel, []byte("one"))
		if e := s.mustNext(t); e.id != first.String() || e.data != "one" {
			t.Errorf("%s: %+v", base, e)
		}
		resp.Body.Close()
		waitFor(t, func() bool { return hub.Stats().HeldStreams == 0 }, "the stream to be let go")
		second, _ := hub.Publish(channel, []byte("two"))
		againResp := get("/live?"+grant, first.String())
		again := &sseReader{resp: againResp, br: bufio.NewReader(againResp.Body)}
		if e := again.mustNext(t); e.id != second.String() || e.data != "two" {
			t.Errorf("%s: replayed %+v", base, e)
		}
		againResp.Body.Close()
		waitFor(t, func() bool { return hub.Stats().HeldStreams == 0 }, "the replayed stream to be let go")
		before := strings.Count(logs.String(), "a grant is refused")
		forged := strings.Replace(grant, "ch="+channel, "ch=admin", 1)
		for _, c := range []struct {
			target string
			status int
		}{
			{"/live?" + forged, 403},
			{"/live", 403},
			{"/live?" + keys.Sign("/live", channel, now.Add(-time.Second), true, "alice"), 403},
			{"/live/x?" + grant, 404},
		} {
			if r := get(c.target, ""); r.StatusCode != c.status {
				t.Errorf("%s%s: %d, want %d", base, c.target, r.StatusCode, c.status)
			}
		}
		if n := strings.Count(logs.String(), "a grant is refused") - before; n != 3 {
			t.Errorf("%s: %d log lines for 3 refused grants:\n%s", base, n, logs.String())
		}
	}
}
