package realtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/m0serve/m0/internal/wire"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxFrame is the largest frame a channel takes, in bytes of data.
const MaxFrame = 64 << 10

// MaxReplayFrames is the most frames a hub journals.
const MaxReplayFrames = 4096

// MaxChannel is the longest channel name, in bytes.
const MaxChannel = 1024

// DefaultQueue is how many frames a subscriber may have waiting when
// Options.Queue is 0.
const DefaultQueue = 64

// ErrDraining is what Subscribe returns once the hub drains.
var ErrDraining = errors.New("realtime: the hub is draining")

// Frame is one published message of a channel. Its fields are read-only
// once it is published: every subscriber shares it.
type Frame struct {
	ID      ID
	Channel string
	// Event is the frame's SSE event type, "" for a message event
	// (ValidEvent); a WebSocket subscriber is sent Data alone.
	Event string
	Data  []byte

	once sync.Once
	sse  []byte // the SSE event, made once
}

// SSE returns the frame as one SSE event, its id and its data.
func (f *Frame) SSE() []byte {
	f.once.Do(func() { f.sse = appendEvent(nil, f.ID.String(), f.Event, f.Data) })
	return f.sse
}

// ValidChannel reports whether a channel may carry frames: a name of 1 to
// MaxChannel bytes whose first is not a control byte (those names are
// reserved).
func ValidChannel(name string) bool {
	return len(name) > 0 && len(name) <= MaxChannel && name[0] >= 0x20 && name[0] != 0x7f
}

// MaxEvent is the longest SSE event type a frame may carry, in bytes.
const MaxEvent = 255

// ValidEvent reports whether a frame may carry event as its SSE event type:
// "" (a message event), or 1 to MaxEvent bytes without a control byte (a
// line break would end the field and begin another) that do not begin
// "m0-", the prefix of the server's own events (GapEvent, PositionEvent),
// which a publisher could otherwise forge.
func ValidEvent(event string) bool {
	if len(event) > MaxEvent || strings.HasPrefix(event, "m0-") {
		return false
	}
	for i := 0; i < len(event); i++ {
		if c := event[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// Bus carries frames between the processes whose hubs share channels (the
// workers of one server, the machines of a cluster). A hub sends each frame
// it publishes; the bus hands every hub the others' frames through
// Hub.Deliver.
type Bus interface {
	// Send is called under the hub's lock, in the order the hub delivered
	// the frames, so that the other processes see one publisher's frames
	// in that order; it must not wait (queue, and send elsewhere).
	Send(f *Frame) error
}

// Options are a hub's settings. A nil *Options and a zero Options mean the
// same: the defaults. Each field's zero is its default, and its "off" a
// named negative.
type Options struct {
	// ReplayFrames is how many of the newest frames the hub journals for
	// Last-Event-ID replay, at most MaxReplayFrames. Zero means
	// DefaultReplayFrames; NoReplay (any negative) keeps none.
	ReplayFrames int
	// Queue is how many frames a subscriber may have waiting before it is
	// dropped as slow; 0 means DefaultQueue.
	Queue int
	// Heartbeat is how long a held stream may go without sending before it
	// is sent an SSE comment or a WebSocket ping. Zero means
	// DefaultHeartbeat; NoHeartbeat (any negative) sends none.
	Heartbeat time.Duration
	// KeepAlive is the TCP keepalive of held sockets: after that long with
	// nothing received the kernel probes every KeepAlive, and drops the
	// connection at the third unanswered probe. Zero means
	// DefaultKeepAlive; NoKeepAlive (any negative) turns keepalive off on
	// them (a listener may have turned it on).
	KeepAlive time.Duration
	// IDs numbers the frames; nil is a Counter of the hub's own.
	IDs IDSource
	// Bus carries frames to and from the other processes; nil is this
	// process alone.
	Bus Bus
	// Logger receives the hub's log lines; nil is slog.Default().
	Logger *slog.Logger
}

// The defaults of Options, and the values that turn each off.
const (
	DefaultReplayFrames = 64
	DefaultHeartbeat    = 15 * time.Second
	DefaultKeepAlive    = 15 * time.Second
	NoReplay            = -1
	NoHeartbeat         = -1
	NoKeepAlive         = -1
)

// DefaultOptions returns the options a nil *Options means, each default
// spelled out: a journal of 64 frames, a heartbeat and TCP keepalive of 15
// seconds.
func DefaultOptions() *Options {
	return &Options{ReplayFrames: DefaultReplayFrames, Heartbeat: DefaultHeartbeat, KeepAlive: DefaultKeepAlive}
}

// Hub is a process's channels: it numbers, journals and fans out the
// frames published to them, to subscribers that each have a bounded
// queue. A publisher never waits for a subscriber.
type Hub struct {
	opts   Options
	ids    IDSource
	log    *slog.Logger
	mu     sync.Mutex
	subs   map[string]map[*Subscription]struct{}
	jnl    *Journal
	drain  bool
	closed chan struct{} // closed by Drain
	live   int           // subscriptions not closed yet
	idle   chan struct{} // closed when live falls to 0, for Shutdown

	// With a bus, frames are released in id order: one that arrives ahead
	// of a lower id is held until that id arrives or ReorderWait passes.
	next     uint64               // the lowest sequence number not released
	held     map[uint64]heldFrame // frames ahead of next
	heldWait *time.Timer          // runs releaseHeld when the first held is due
	reorder  time.Duration        // ReorderWait, or the bus's own (Reorderer)

	published, replayed, gaps, slow, refused atomic.Uint64
	heldStreams, heldSockets                 atomic.Int64
}

// New returns a hub. A nil opts is DefaultOptions(). ReplayFrames above
// MaxReplayFrames is held to it (m0serve refuses more before it starts).
func New(opts *Options) *Hub {
	if opts == nil {
		opts = DefaultOptions()
	}
	h := &Hub{opts: *opts, subs: map[string]map[*Subscription]struct{}{}, closed: make(chan struct{})}
	h.opts.ReplayFrames = min(wire.Setting(h.opts.ReplayFrames, DefaultReplayFrames), MaxReplayFrames)
	h.opts.Heartbeat = wire.Setting(h.opts.Heartbeat, DefaultHeartbeat)
	h.opts.KeepAlive = wire.Setting(h.opts.KeepAlive, DefaultKeepAlive)
	if h.opts.Queue <= 0 {
		h.opts.Queue = DefaultQueue
	}
	h.ids = opts.IDs
	if h.ids == nil {
		h.ids = NewCounter()
	}
	h.log = opts.Logger
	if h.log == nil {
		h.log = slog.Default()
	}
	start := h.ids.Newest()
	h.jnl = NewJournal(h.opts.ReplayFrames, start)
	h.next, h.held, h.reorder = start.Seq+1, map[uint64]heldFrame{}, ReorderWait
	if r, ok := h.opts.Bus.(Reorderer); ok {
		h.reorder = r.ReorderWait()
	}
	return h
}

// Publish numbers data as the next frame of channel, journals it and hands
// it to every subscriber of the channel, here and, through the bus, in the
// other processes. ok is false, and nothing is sent, for a channel name
// ValidChannel refuses or data over MaxFrame bytes. data is copied.
func (h *Hub) Publish(channel string, data []byte) (id ID, ok bool) {
	return h.publish(channel, "", ID{}, data)
}

// PublishEvent is Publish of a frame whose SSE event type is event (an
// EventSource dispatches it to that type's listeners). ok is false, and
// nothing is sent, also for an event ValidEvent refuses.
func (h *Hub) PublishEvent(channel, event string, data []byte) (id ID, ok bool) {
	return h.publish(channel, event, ID{}, data)
}

// publish is PublishEvent as event id, or the next id when id is zero.
func (h *Hub) publish(channel, event string, id ID, data []byte) (ID, bool) {
	if !ValidChannel(channel) || len(data) > MaxFrame || !ValidEvent(event) {
		h.refused.Add(1)
		return ID{}, false
	}
	f := &Frame{ID: id, Channel: channel, Event: event, Data: bytes.Clone(data)}
	h.mu.Lock()
	if f.ID.IsZero() {
		f.ID = h.ids.Next()
	}
	h.orderLocked(f)
	var err error
	if h.opts.Bus != nil {
		err = h.opts.Bus.Send(f) // in id order: the lock orders the sends too
	}
	h.mu.Unlock()
	h.published.Add(1)
	if err != nil {
		h.log.Warn("realtime: the bus did not take a frame", "channel", channel, "id", f.ID.String(), "error", err.Error())
	}
	return f.ID, true
}

// NextID allocates the next event id from the hub's source, for a frame
// published with PublishID.
func (h *Hub) NextID() ID { return h.ids.Next() }

// PublishID is Publish with an id the caller took from NextID (a
// producer numbers its frames itself). ok is false, and nothing is sent,
// also for an id the hub's source cannot have handed out: zero, of another
// epoch, or newer than its newest.
func (h *Hub) PublishID(channel string, id ID, data []byte) (ok bool) {
	if newest := h.ids.Newest(); id.IsZero() || id.Epoch != newest.Epoch || id.Seq > newest.Seq {
		h.refused.Add(1)
		return false
	}
	_, ok = h.publish(channel, "", id, data)
	return ok
}

// Deliver journals a frame another process published and hands it to this
// process's subscribers. It is the receiving end of a Bus.
func (h *Hub) Deliver(f *Frame) {
	h.mu.Lock()
	h.orderLocked(f)
	h.mu.Unlock()
}

// ReorderWait is how long a hub with a bus holds a frame that arrived
// ahead of a lower id for that id: frames published in several processes
// reach a process in any order, and a client that resumes from the newer
// would otherwise never be sent the older.
const ReorderWait = 100 * time.Millisecond

// Reorderer is a Bus whose frames can take longer than ReorderWait to
// arrive behind a later one (through a database, say): the hub holds a
// frame that long for the ids before it.
type Reorderer interface {
	ReorderWait() time.Duration
}

// heldFrame is a frame held for the ids before it, until due.
type heldFrame struct {
	f   *Frame
	due time.Time
}

// orderLocked delivers f in id order: at once when it is the next id (and
// then the frames it was holding up), or when it is older than the next;
// otherwise it is held for the ids before it, for up to ReorderWait (or the
// bus's, Reorderer). A hub
// without a bus numbers every frame itself, in order.
func (h *Hub) orderLocked(f *Frame) {
	switch {
	case h.opts.Bus == nil || f.ID.Epoch != h.jnl.epoch || f.ID.Seq < h.next:
		h.deliverLocked(f) // late, or from before this hub: as it comes
	case f.ID.Seq == h.next:
		h.deliverLocked(f)
		h.next++
		h.releaseNextLocked()
	default:
		h.held[f.ID.Seq] = heldFrame{f, time.Now().Add(h.reorder)}
		if h.heldWait == nil {
			h.heldWait = time.AfterFunc(h.reorder, h.releaseHeld)
		}
	}
}

// releaseNextLocked delivers the held frames that follow next without a
// gap, and stops the timer when none is left.
func (h *Hub) releaseNextLocked() {
	for hf, ok := h.held[h.next]; ok; hf, ok = h.held[h.next] {
		delete(h.held, h.next)
		h.deliverLocked(hf.f)
		h.next++
	}
	if len(h.held) == 0 && h.heldWait != nil {
		h.heldWait.Stop()
		h.heldWait = nil
	}
}

// releaseHeld gives up on the ids before the newest frame whose wait is
// over (taken and never published, or lost with a process): that frame
// and every one held before it are delivered, in id order. The timer is
// set again for the next frame to come due.
func (h *Hub) releaseHeld() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.heldWait = nil
	now := time.Now()
	var last uint64
	for seq, hf := range h.held {
		if !hf.due.After(now) && seq > last {
			last = seq
		}
	}
	if last > 0 {
		seqs := make([]uint64, 0, len(h.held))
		for seq := range h.held {
			if seq <= last {
				seqs = append(seqs, seq)
			}
		}
		slices.Sort(seqs)
		for _, seq := range seqs {
			h.deliverLocked(h.held[seq].f)
			delete(h.held, seq)
		}
		h.next = last + 1
		h.releaseNextLocked()
	}
	if len(h.held) > 0 && h.heldWait == nil {
		first := now.Add(h.reorder)
		for _, hf := range h.held {
			if hf.due.Before(first) {
				first = hf.due
			}
		}
		h.heldWait = time.AfterFunc(first.Sub(now), h.releaseHeld)
	}
}

// deliverLocked journals f and queues it for each subscriber of its
// channel; a subscriber whose queue is full is dropped, never waited for.
func (h *Hub) deliverLocked(f *Frame) {
	if !h.jnl.Add(f) {
		return // delivered already, or merged from a sibling's journal
	}
	for s := range h.subs[f.Channel] {
		select {
		case s.q <- f:
		default:
			h.slow.Add(1)
			h.endLocked(s, endSlow)
		}
	}
}

// Subscription is one subscriber of a channel: the frames it was owed on
// subscribing (Replay, or a Gap), then the live frames on C.
type Subscription struct {
	// Replay is the frames published since the id the subscriber presented,
	// oldest first, sent before anything live.
	Replay []*Frame
	// Gap is set, with Replay empty, when the journal could not supply
	// every frame since the id presented.
	Gap *Gap
	// Position, unless zero, is where the subscriber stands once Replay
	// or Gap is sent: the newest id allocated when it subscribed without
	// an id, or was sent a gap. An SSE stream says it (a PositionEvent,
	// whose id a client keeps as its last event id), so that a client cut
	// before its first frame comes back for what it missed instead of
	// losing it unawares.
	Position ID

	hub     *Hub
	channel string
	q       chan *Frame
	done    chan struct{}
	why     atomic.Int32 // why done was closed
	closed  atomic.Bool
}

// Why a subscription ended from the hub's side.
const (
	endNone    = iota
	endSlow    // its queue overflowed
	endDrained // the hub drains
)

// Gap says that a reconnecting subscriber cannot be sent all it missed:
// the id it presented (as sent, which may not be an id at all) and the
// newest id allocated.
type Gap struct {
	LastEventID string
	Newest      ID
}

// Subscribe subscribes to channel. With resume false the subscription
// starts from the live feed. With resume true, lastEventID is what the
// client presented, and the subscription carries every frame of the channel
// after it, or a Gap. Replay and registration are one step under the hub's
// lock, so no frame is sent twice or lost between them.
func (h *Hub) Subscribe(channel string, resume bool, lastEventID string) (*Subscription, error) {
	if !ValidChannel(channel) {
		return nil, errors.New("realtime: an invalid channel name")
	}
	s := &Subscription{hub: h, channel: channel, q: make(chan *Frame, h.opts.Queue), done: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.drain {
		return nil, ErrDraining
	}
	if !resume {
		s.Position = h.ids.Newest()
	} else {
		newest := h.ids.Newest()
		after, ok := ParseID(lastEventID)
		var frames []*Frame
		if ok {
			frames, ok = h.jnl.Since(channel, after, newest)
		}
		if ok {
			s.Replay = frames
			h.replayed.Add(uint64(len(frames)))
		} else {
			s.Gap = &Gap{LastEventID: lastEventID, Newest: newest}
			s.Position = newest
			h.gaps.Add(1)
		}
	}
	m := h.subs[channel]
	if m == nil {
		m = map[*Subscription]struct{}{}
		h.subs[channel] = m
	}
	m[s] = struct{}{}
	h.live++
	return s, nil
}

// C is where the subscription's live frames arrive.
func (s *Subscription) C() <-chan *Frame { return s.q }

// Done is closed when the hub lets go of the subscription: it was too slow
// (its queue overflowed), or the hub drains. Drained tells which.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Drained reports whether the subscription ended because the hub drains.
func (s *Subscription) Drained() bool { return s.why.Load() == endDrained }

// Close unsubscribes. It is safe to call more than once.
func (s *Subscription) Close() {
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	h := s.hub
	h.mu.Lock()
	h.endLocked(s, endNone)
	h.live--
	if h.live == 0 && h.idle != nil {
		close(h.idle)
		h.idle = nil
	}
	h.mu.Unlock()
}

// endLocked removes s from its channel and, when the hub ends it, tells it
// why.
func (h *Hub) endLocked(s *Subscription, why int32) {
	m := h.subs[s.channel]
	if _, ok := m[s]; !ok {
		return
	}
	delete(m, s)
	if len(m) == 0 {
		delete(h.subs, s.channel)
	}
	if why != endNone {
		s.why.Store(why)
		close(s.done)
	}
}

// Drain ends every subscription (Drained reports it) and refuses new ones:
// the streams held close, their clients to reconnect to a server that
// serves. Publishing goes on. It is safe to call more than once.
func (h *Hub) Drain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.drain {
		return
	}
	h.drain = true
	close(h.closed)
	for _, m := range h.subs {
		for s := range m {
			h.endLocked(s, endDrained)
		}
	}
}

// Lost tells the hub that frames numbered up to through may have been
// published and will never reach it (another process's, published while
// the bus could not reach this one, and gone since): a client that resumes
// from before through is sent m0-gap, and every held subscriber is let go,
// to resume so rather than go on unaware of what it missed.
func (h *Hub) Lost(through ID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.jnl.Lose(through)
	for _, m := range h.subs {
		for s := range m {
			h.endLocked(s, endSlow)
		}
	}
}

// Shutdown drains the hub and waits until every subscription is closed: a
// held stream has sent its retry and ended, a held socket its close. It
// returns ctx's error if ctx ends first. It is safe to call more than once.
func (h *Hub) Shutdown(ctx context.Context) error {
	h.Drain()
	h.mu.Lock()
	if h.live == 0 {
		h.mu.Unlock()
		return nil
	}
	if h.idle == nil {
		h.idle = make(chan struct{})
	}
	idle, n := h.idle, h.live
	h.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("realtime: %d held connections still open: %w", n, ctx.Err())
	}
}

// Draining reports whether Drain was called.
func (h *Hub) Draining() bool {
	select {
	case <-h.closed:
		return true
	default:
		return false
	}
}

// Newest returns the newest id allocated.
func (h *Hub) Newest() ID { return h.ids.Newest() }

// Journals reports whether the hub keeps a journal (ReplayFrames is not
// off): whether a client that resumes can be replayed anything.
func (h *Hub) Journals() bool { return h.opts.ReplayFrames > 0 }

// Stats are a hub's counts since it was made.
type Stats struct {
	HeldStreams    int64  // SSE streams held now
	HeldWebSockets int64  // WebSockets held now
	Published      uint64 // frames published here
	Replayed       uint64 // frames sent to reconnecting subscribers from the journal
	Gaps           uint64 // m0-gap events sent
	Slow           uint64 // subscribers dropped because their queue overflowed
	Refused        uint64 // frames refused (a channel name, or over MaxFrame)
	JournalDepth   int    // frames in the journal now
}

// Stats returns the hub's counts.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	depth := h.jnl.Len()
	h.mu.Unlock()
	return Stats{
		HeldStreams:    h.heldStreams.Load(),
		HeldWebSockets: h.heldSockets.Load(),
		Published:      h.published.Load(),
		Replayed:       h.replayed.Load(),
		Gaps:           h.gaps.Load(),
		Slow:           h.slow.Load(),
		Refused:        h.refused.Load(),
		JournalDepth:   depth,
	}
}

// Journal returns the frames the hub journals, oldest first, then those it
// holds for the ids before them, and its floor: every frame numbered above
// it that this process has seen is among them. A replacement worker asks a
// sibling for it (Warm).
func (h *Hub) Journal() (floor ID, frames []*Frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seq, frames := h.jnl.Frames()
	if len(h.jnl.ring) > 0 {
		for _, hf := range h.held {
			frames = append(frames, hf.f)
		}
	}
	return ID{Epoch: h.jnl.epoch, Seq: seq}, frames
}

// Warm adds another process's journal (Journal) to this hub's: a worker
// that replaced one that died then replays what its clients missed before
// it started, rather than sending them a gap.
func (h *Hub) Warm(floor ID, frames []*Frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.jnl.Merge(floor.Epoch, floor.Seq, frames)
	// The frames merged are delivered, as far as they follow on: the next
	// one live is not held for them.
	for h.jnl.holds(ID{Epoch: h.jnl.epoch, Seq: h.next}) {
		delete(h.held, h.next)
		h.next++
	}
	h.releaseNextLocked()
}
