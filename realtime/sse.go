package realtime

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// GapEvent is the event type of the frame that tells a reconnecting client
// it missed frames the journal cannot supply.
const GapEvent = "m0-gap"

// PositionEvent is the event type of the frame that says where a stream
// stands: its id is the newest allocated when the stream began without an
// id, or after a gap; its data is empty. A browser keeps the id as its last
// event id (and dispatches the event only to a listener of this type), so
// a client cut before its first frame comes back for what it missed.
const PositionEvent = "m0-position"

// appendEvent appends one SSE event: its id (none when empty), its type
// (none when empty), and data as "data:" lines. SSE ends a line at CR, LF
// or CRLF, and a client joins data lines with LF: each of those line ends
// in data is sent as a line break, which the client reads as LF.
func appendEvent(b []byte, id, event string, data []byte) []byte {
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	if event != "" {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	for {
		b = append(b, "data: "...)
		i := 0
		for i < len(data) && data[i] != '\n' && data[i] != '\r' {
			i++
		}
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if i == len(data) {
			break
		}
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return append(b, '\n')
}

// gapData is the data of an m0-gap event.
type gapData struct {
	LastEventID string `json:"last_event_id"`
	NewestID    string `json:"newest_id"`
}

// appendGap appends the unnumbered m0-gap event for g.
func appendGap(b []byte, g *Gap) []byte {
	data, _ := json.Marshal(gapData{LastEventID: g.LastEventID, NewestID: g.Newest.String()})
	return appendEvent(b, "", GapEvent, data)
}

// appendPosition appends a PositionEvent of id. It carries an (empty)
// data field: an event without one is not dispatched, and Gecko and WebKit
// then keep nothing of its id.
func appendPosition(b []byte, id ID) []byte {
	return appendEvent(b, id.String(), PositionEvent, nil)
}

// idleTimer fires once a held connection has been sent nothing for the
// hub's Heartbeat (its C is nil when the heartbeat is off).
type idleTimer struct {
	C <-chan time.Time
	t *time.Timer
	d time.Duration
}

func newIdleTimer(d time.Duration) *idleTimer {
	it := &idleTimer{d: d}
	if d > 0 {
		it.t = time.NewTimer(d)
		it.C = it.t.C
	}
	return it
}

// sent starts the wait again: something went out.
func (it *idleTimer) sent() {
	if it.t != nil {
		it.t.Reset(it.d)
	}
}

func (it *idleTimer) stop() {
	if it.t != nil {
		it.t.Stop()
	}
}

// heartbeat is the comment an idle stream is sent.
var heartbeat = []byte(":\n\n")

// Reconnecting clients are asked to wait between these many milliseconds
// after a drain, each a random time, so that thousands do not reconnect in
// the same millisecond.
const (
	retryMin = 1000
	retryMax = 5000
)

// appendRetry appends a retry field with a jittered delay.
func appendRetry(b []byte) []byte {
	b = append(b, "retry: "...)
	b = strconv.AppendInt(b, int64(retryMin+rand.IntN(retryMax-retryMin)), 10)
	return append(b, '\n', '\n')
}

// sink is where a held SSE stream's body goes: a connection m0serve writes
// itself, or a net/http ResponseWriter.
type sink interface {
	// send writes the body bytes b[headroom:] and pushes them to the
	// client. b[:headroom] is free for the sink's framing, and it may
	// append to b.
	send(b []byte) error
}

// headroom is the room a body buffer leaves before its bytes for a sink's
// framing (a chunk's size line).
const headroom = 16

// bodies are the buffers streams compose their writes in, taken for one
// write at a time: a held stream keeps none while it waits.
var bodies = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxBatch is how many bytes of queued frames a stream sends in one write.
const maxBatch = 64 << 10

// stream sends s on out until the client leaves (gone), the hub lets go of
// it, or a write fails: first what the subscription was owed (its replay,
// or a gap), then each live frame, with a heartbeat comment when it has
// been idle for the hub's Heartbeat. A drained stream ends with a retry
// field that spreads the clients' reconnections. It reports whether the
// stream ended cleanly (its end may be sent).
func (h *Hub) stream(s *Subscription, out sink, gone <-chan struct{}) (clean bool) {
	send := func(fill func(b []byte) []byte) error {
		bp := bodies.Get().(*[]byte)
		b := fill((*bp)[:headroom])
		err := out.send(b)
		if cap(b) <= 2*maxBatch {
			*bp = b[:0]
		}
		bodies.Put(bp)
		return err
	}
	// What the subscriber was owed, in writes of about maxBatch: a replay
	// of a whole journal is not one buffer.
	replay := s.Replay
	first := true
	for first || len(replay) > 0 {
		err := send(func(b []byte) []byte {
			if first && s.Gap != nil {
				b = appendGap(b, s.Gap)
			}
			for len(replay) > 0 && (len(b) < maxBatch || first) {
				b = append(b, replay[0].SSE()...)
				replay = replay[1:]
				first = false
			}
			if len(replay) == 0 && !s.Position.IsZero() {
				b = appendPosition(b, s.Position)
			}
			return b
		})
		first = false
		if err != nil {
			return false
		}
	}
	idle := newIdleTimer(h.opts.Heartbeat)
	defer idle.stop()
	var err error
	for {
		select {
		case f := <-s.C():
			err = send(func(b []byte) []byte {
				b = append(b, f.SSE()...)
				for len(b) < maxBatch {
					select {
					case f := <-s.C():
						b = append(b, f.SSE()...)
					default:
						return b
					}
				}
				return b
			})
		case <-idle.C:
			err = send(func(b []byte) []byte { return append(b, heartbeat...) })
		case <-s.Done():
			if s.Drained() {
				return send(appendRetry) == nil
			}
			return true // too slow: it ends, and the client comes back for what it missed
		case <-gone:
			return false
		}
		if err != nil {
			return false
		}
		idle.sent()
	}
}
