package realtime_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/m0serve/m0/realtime"
	"github.com/r3labs/sse/v2"
)

// TestBrokerWithAnIndependentClient: r3labs/sse, a client written apart
// from this package, reads the broker's stream, and resumes with the id it
// last saw.
func TestBrokerWithAnIndependentClient(t *testing.T) {
	hub := realtime.New(nil)
	mux := http.NewServeMux()
	mux.Handle("/events", hub.Broker(func(r *http.Request) string { return r.URL.Query().Get("stream") }))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client := sse.NewClient(srv.URL + "/events")
	events := make(chan *sse.Event, 16)
	ctx, cancel := context.WithCancel(context.Background())
	go client.SubscribeWithContext(ctx, "news", func(e *sse.Event) {
		if len(e.Data) > 0 {
			events <- e
		}
	})
	waitFor(t, func() bool { return hub.Stats().HeldStreams == 1 }, "the client's stream")
	var ids []string
	for i := range 3 {
		id, _ := hub.Publish("news", []byte("item "+strconv.Itoa(i)))
		ids = append(ids, id.String())
	}
	for i := range 3 {
		select {
		case e := <-events:
			if string(e.ID) != ids[i] || string(e.Data) != fmt.Sprintf("item %d", i) {
				t.Errorf("event %d: id %q data %q", i, e.ID, e.Data)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d did not come", i)
		}
	}
	cancel()
	waitFor(t, func() bool { return hub.Stats().HeldStreams == 0 }, "the stream to end")

	// A new client that resumes from the first id gets the other two.
	again := sse.NewClient(srv.URL + "/events")
	again.LastEventID.Store([]byte(ids[0]))
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go again.SubscribeWithContext(ctx, "news", func(e *sse.Event) {
		if len(e.Data) > 0 {
			events <- e
		}
	})
	for i := 1; i < 3; i++ {
		select {
		case e := <-events:
			if string(e.ID) != ids[i] {
				t.Errorf("replayed %q, want %s", e.ID, ids[i])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("replayed event %d did not come", i)
		}
	}
}

func TestBrokerRefuses(t *testing.T) {
	hub := realtime.New(nil)
	srv := httptest.NewServer(hub.Broker(func(r *http.Request) string { return r.URL.Query().Get("c") }))
	defer srv.Close()
	for _, c := range []struct {
		method, query string
		status        int
	}{{"POST", "?c=a", 405}, {"GET", "", 404}, {"GET", "?c=%01x", 404}, {"HEAD", "?c=a", 200}} {
		req, _ := http.NewRequest(c.method, srv.URL+c.query, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.query, resp.StatusCode, c.status)
		}
	}
}

// TestSlowStreamComesBack: a stream whose client stops reading is dropped
// once its queue overflows, and the publisher goes on; the client then
// reads to the end of its stream and reconnects with the last id it saw:
// between what it read and what it is sent again (or a gap), nothing is
// lost silently.
func TestSlowStreamComesBack(t *testing.T) {
	f := serve(t, &realtime.Options{ReplayFrames: 4096, Queue: 4})
	f.each(t, func(t *testing.T, base string) {
		channel := "slow-" + base[len(base)-5:]
		s := openSSE(t, base+"/events?c="+channel, "")
		before := f.hub.Stats().Slow
		big := make([]byte, 60<<10)
		published := 0
		for f.hub.Stats().Slow == before { // the client reads nothing meanwhile
			if _, ok := f.hub.Publish(channel, big); !ok {
				t.Fatal("refused")
			}
			published++
			if published > 10000 {
				t.Fatal("never dropped")
			}
		}
		n := 0
		for {
			if _, err := s.next(); err != nil {
				break
			}
			n++
		}
		// As a browser does: back with the last id read, which is the
		// stream's starting position when it was dropped before its
		// first frame.
		if s.last == "" {
			t.Fatal("no id before the end, not even the position")
		}
		again := openSSE(t, base+"/events?c="+channel, s.last)
		rest := 0
		for rest+n < published {
			e := again.mustNext(t)
			if e.event == realtime.GapEvent {
				t.Fatalf("a gap with the whole journal kept: %+v", e)
			}
			rest++
		}
		if rest+n != published {
			t.Errorf("read %d, then %d more, of %d published", n, rest, published)
		}
	})
}

// TestSocketHeartbeat: an idle held WebSocket is pinged.
func TestSocketHeartbeat(t *testing.T) {
	f := serve(t, &realtime.Options{Heartbeat: 50 * time.Millisecond})
	f.each(t, func(t *testing.T, base string) {
		conn, _ := dialWS(t, base, "/ws?c=quiet", nil)
		pinged := make(chan struct{}, 1)
		conn.SetPingHandler(func(string) error {
			select {
			case pinged <- struct{}{}:
			default:
			}
			return nil
		})
		go conn.ReadMessage() // control frames are read by a reader
		select {
		case <-pinged:
		case <-time.After(10 * time.Second):
			t.Fatal("no ping")
		}
		conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""))
	})
}
