package prefork

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/m0serve/m0/internal/sock"
	"github.com/m0serve/m0/realtime"
	"golang.org/x/sys/unix"
)

// The bus is a mesh of inboxes: each worker reads one datagram socket
// (one end of a socketpair the supervisor made and keeps), and every
// worker, and every child process handed the write ends, writes to the
// others'. A message is one datagram:
//
//	byte 0     kind
//	bytes 1-2  the sender's worker number, little-endian; 0xffff is a child
//	then       what the kind carries, little-endian
//
// Kinds a child writes (m0serve.m0pub):
//
//	'F' a numbered frame: epoch u64, seq u64, channel length u16, channel, data
//	'U' an unnumbered frame: channel length u16, channel, data; the worker
//	    that reads it numbers and publishes it, as m0pub.publish would
//
// A frame with an SSE event type sets the channel length's top bit
// (eventFlag) and has the event's length (u8) and the event between the
// channel and the data. A channel is at most 1,024 bytes, so the bit is
// free, and a frame without an event is as it was: a server started by
// SIGUSR2 and the one it replaces read each other's frames.
//
// Kinds between workers:
//
//	'C' a connection, as the descriptor it carries (SCM_RIGHTS)
//	'J' a request for the journal: request u32; answered by 'j' frames
//	    (request u32, then a numbered frame's fields) and one 'k' (request
//	    u32, floor epoch u64, floor seq u64, frames sent u32)
//	'M' a request for the metrics: request u32; answered by 'm' (request
//	    u32, the exposition)
//
// Kinds from a successor's worker (SIGUSR2: a new server beside this one,
// until this one has drained), each carrying the successor worker's inbox
// (SCM_RIGHTS), from 0xfffe:
//
//	'S' forward to that inbox the frames this worker publishes (and, from
//	    the first worker running, its children's), as 'F', until this
//	    worker exits or the inbox is gone; the successor's worker sends
//	    this worker its own
//	'J' as between workers, answered to that inbox
const (
	kindFrame      = 'F'
	kindUnnumbered = 'U'
	kindConn       = 'C'
	kindJournal    = 'J'
	kindJournalFr  = 'j'
	kindJournalEnd = 'k'
	kindMetrics    = 'M'
	kindMetricsAns = 'm'
	kindForward    = 'S'

	fromChild     = 0xffff
	fromSuccessor = 0xfffe
	// maxDatagram bounds a message read: a whole frame and its channel
	// take 66 KB; a sibling's metrics more. A datagram is bounded by the
	// socket's send buffer (net.core.wmem_default, 208 KB by default).
	maxDatagram = 1 << 20
	// sendQueue is how many messages may wait for a sibling that is not
	// reading (being replaced, say) before more are dropped.
	sendQueue = 4096
)

// Bus is one worker's end of the mesh: it sends what its hub publishes to
// every sibling and hands its hub what they publish (a realtime.Bus), and
// carries handed-off connections and the requests of a replaced worker and
// of the metrics.
type Bus struct {
	self int
	in   *net.UnixConn
	out  []*net.UnixConn // every worker's inbox, this one's included
	q    []chan []byte   // per sibling, drained by a sender of its own

	inUse   func(i int) bool // the slots that run a worker (Page.InUse); nil: every one
	hub     atomic.Pointer[realtime.Hub]
	conns   chan net.Conn
	lost    chan error // handed connections that could not be taken
	gather  atomic.Pointer[func() []byte]
	reqs    atomic.Uint32
	mu      sync.Mutex
	waiting map[uint32]chan message
	dropped atomic.Uint64
	// forwards are the other server's inboxes (SIGUSR2), fed this
	// worker's frames: a new server's workers' (kind 'S'), or the old
	// server's (Bridge). Each has a sender of its own.
	fwdMu      sync.Mutex
	forwards   []*forward
	fwdDropped atomic.Uint64
	log        *slog.Logger
	done       chan struct{}
	once       sync.Once
}

// message is a datagram read, split.
type message struct {
	kind byte
	from int
	body []byte
	file *os.File
	cut  bool // a descriptor it carried was dropped (MSG_CTRUNC): none fitted
}

// NewBus returns worker self's end of a mesh: in is its inbox, out every
// worker's inbox in order. It takes the files, closing them on an error,
// and reads nothing until Start.
func NewBus(self int, in *os.File, out []*os.File) (*Bus, error) {
	b := &Bus{self: self, conns: make(chan net.Conn, 64), lost: make(chan error, 64), waiting: map[uint32]chan message{},
		log: slog.Default(), done: make(chan struct{})}
	// Requests are numbered from a start of this process's own: an answer
	// meant for a predecessor, still in the inbox, matches none of them.
	b.reqs.Store(uint32(os.Getpid()) << 16)
	var err error
	if b.in, err = unixConn(in); err != nil {
		for _, f := range out {
			f.Close()
		}
		return nil, err
	}
	for i, f := range out {
		c, err := unixConn(f)
		if err != nil {
			for _, f := range out[i+1:] {
				f.Close()
			}
			b.Close()
			return nil, err
		}
		b.out = append(b.out, c)
		q := make(chan []byte, sendQueue)
		b.q = append(b.q, q)
		if i != self {
			go b.send(i, c, q)
		}
	}
	return b, nil
}

func unixConn(f *os.File) (*net.UnixConn, error) {
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("prefork: an inherited bus socket: %w", err)
	}
	u, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("prefork: an inherited bus descriptor is not a unix socket")
	}
	return u, nil
}

// send writes sibling i's queue to its inbox, c. A write waits while the
// sibling's inbox is full; the queue absorbs a sibling being replaced.
func (b *Bus) send(i int, c *net.UnixConn, q chan []byte) {
	b.pump(c, q, 0, func(err error) bool {
		if !errors.Is(err, net.ErrClosed) {
			b.log.Warn("m0serve: the bus did not reach a worker", "worker", i, "error", err.Error())
		}
		return false
	})
}

// pump writes q's messages to c until Close, each write given up to wait
// (0: no bound); failed is told of a write that fails, and says whether to
// stop.
func (b *Bus) pump(c *net.UnixConn, q chan []byte, wait time.Duration, failed func(error) bool) {
	for {
		select {
		case m := <-q:
			if wait > 0 {
				c.SetWriteDeadline(time.Now().Add(wait))
			}
			if err := b.write(c, m); err != nil && failed(err) {
				return
			}
		case <-b.done:
			return
		}
	}
}

// write writes m to c, through a full inbox (retry).
func (b *Bus) write(c *net.UnixConn, m []byte) error {
	return b.retry(func() error { _, err := c.Write(m); return err })
}

// retry runs a write to a sibling's inbox until it is not refused for a
// full one. A full inbox makes the write wait on Linux; macOS fails it at
// once with ENOBUFS instead, and it is tried again, after a pause that
// doubles from 1 ms up to 50 ms, until the bus closes or the write's
// deadline passes (its error then).
func (b *Bus) retry(write func() error) error {
	pause := time.Millisecond
	for {
		err := write()
		if !errors.Is(err, syscall.ENOBUFS) {
			return err
		}
		select {
		case <-time.After(pause):
		case <-b.done:
			return net.ErrClosed
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// Start hands the hub the frames the siblings and child processes publish,
// and answers the siblings' requests, until Close.
func (b *Bus) Start(hub *realtime.Hub) {
	b.hub.Store(hub)
	go b.read()
}

// Close stops reading and sending; the inbox stays with the supervisor.
func (b *Bus) Close() error {
	b.once.Do(func() {
		b.fwdMu.Lock()
		close(b.done)
		for _, fw := range b.forwards {
			fw.c.Close() // a sender blocked in a write returns
		}
		b.forwards = nil
		b.fwdMu.Unlock()
		b.in.Close()
	})
	return nil
}

// Send hands a frame this worker published to every sibling (realtime.Bus),
// and to a successor's workers.
func (b *Bus) Send(f *realtime.Frame) error {
	m := appendFrame(header(kindFrame, b.self), f)
	for i := range b.out {
		if i != b.self && b.runs(i) {
			b.enqueue(i, m)
		}
	}
	b.forward(m)
	return nil
}

// forward is an inbox of the other server's (SIGUSR2: the new server's
// workers, or the old one's) that this worker feeds its frames, and the
// queue its sender drains.
type forward struct {
	c *net.UnixConn
	q chan []byte
}

// forwardWait bounds a write to the other server's inbox: one that is not
// read for that long (an old server's, its workers gone) is let go.
const forwardWait = time.Second

// addForward starts feeding this worker's frames to an inbox of the other
// server's. The bus takes c.
func (b *Bus) addForward(c *net.UnixConn) {
	fw := &forward{c: c, q: make(chan []byte, sendQueue)}
	b.fwdMu.Lock()
	select {
	case <-b.done:
		b.fwdMu.Unlock()
		c.Close()
		return
	default:
	}
	b.forwards = append(b.forwards, fw)
	b.fwdMu.Unlock()
	go func() {
		defer c.Close()
		// A write fails once the other server is gone (it did not take
		// over, or it has drained), or has stopped reading.
		b.pump(c, fw.q, forwardWait, func(error) bool { b.dropForward(fw); return true })
	}()
}

func (b *Bus) dropForward(fw *forward) {
	b.fwdMu.Lock()
	defer b.fwdMu.Unlock()
	for i, g := range b.forwards {
		if g == fw {
			b.forwards = append(b.forwards[:i:i], b.forwards[i+1:]...)
			return
		}
	}
}

// forward hands a frame message to the other server's inboxes. A worker
// forwards the frames it publishes, and one worker (the first running)
// those of child processes, which reach every worker: each frame once.
func (b *Bus) forward(m []byte) {
	b.fwdMu.Lock()
	defer b.fwdMu.Unlock()
	for _, fw := range b.forwards {
		select {
		case fw.q <- m:
		default:
			if b.fwdDropped.Add(1) == 1 {
				b.log.Warn("m0serve: an inbox of the other server (SIGUSR2) is not read; dropping the frames to it")
			}
		}
	}
}

// forwarding reports whether any frame is forwarded: a message is made
// for it only then.
func (b *Bus) forwarding() bool {
	b.fwdMu.Lock()
	defer b.fwdMu.Unlock()
	return len(b.forwards) > 0
}

// firstRunning reports whether this worker runs in the lowest slot in use.
func (b *Bus) firstRunning() bool {
	for i := range b.self {
		if b.runs(i) {
			return false
		}
	}
	return true
}

func (b *Bus) enqueue(i int, m []byte) {
	select {
	case b.q[i] <- m:
	default:
		if b.dropped.Add(1) == 1 {
			b.log.Error("m0serve: a worker's bus queue is full; dropping its messages", "worker", i)
		}
	}
}

func header(kind byte, from int) []byte {
	return append(make([]byte, 0, 64), kind, byte(from), byte(from>>8))
}

// eventFlag marks, in a frame's channel length, that an event follows the
// channel.
const eventFlag = 0x8000

// A channel's length never reaches eventFlag, and an event's fits its byte.
var (
	_ [eventFlag - 1 - realtime.MaxChannel]struct{}
	_ [255 - realtime.MaxEvent]struct{}
)

func appendFrame(m []byte, f *realtime.Frame) []byte {
	m = binary.LittleEndian.AppendUint64(m, f.ID.Epoch)
	m = binary.LittleEndian.AppendUint64(m, f.ID.Seq)
	if f.Event == "" {
		m = binary.LittleEndian.AppendUint16(m, uint16(len(f.Channel)))
		m = append(m, f.Channel...)
	} else {
		m = binary.LittleEndian.AppendUint16(m, uint16(len(f.Channel))|eventFlag)
		m = append(m, f.Channel...)
		m = append(m, byte(len(f.Event)))
		m = append(m, f.Event...)
	}
	return append(m, f.Data...)
}

// parseFrame reads a frame's fields; numbered says whether the id is there.
func parseFrame(body []byte, numbered bool) (*realtime.Frame, bool) {
	var f realtime.Frame
	if numbered {
		if len(body) < 16 {
			return nil, false
		}
		f.ID = realtime.ID{Epoch: binary.LittleEndian.Uint64(body), Seq: binary.LittleEndian.Uint64(body[8:])}
		body = body[16:]
	}
	if len(body) < 2 {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint16(body))
	event := n&eventFlag != 0
	n &^= eventFlag
	if len(body) < 2+n {
		return nil, false
	}
	f.Channel, body = string(body[2:2+n]), body[2+n:]
	if event {
		if len(body) < 1 || len(body) < 1+int(body[0]) {
			return nil, false
		}
		f.Event, body = string(body[1:1+int(body[0])]), body[1+int(body[0]):]
	}
	f.Data = body
	return &f, true
}

func (b *Bus) read() {
	buf := make([]byte, maxDatagram)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, flags, _, err := b.in.ReadMsgUnix(buf, oob)
		if err != nil && descriptorDropped(err) {
			// macOS fails the read of a message whose descriptor does not
			// fit (Linux delivers it with MSG_CTRUNC), and drops the
			// message: a handed connection, as a rule.
			b.loses(fmt.Errorf("the descriptor did not fit: %w", err))
			continue
		}
		if err != nil {
			select {
			case <-b.done:
			default:
				b.log.Error("m0serve: the bus stopped", "error", err.Error())
			}
			return
		}
		m := message{cut: flags&unix.MSG_CTRUNC != 0}
		if oobn > 0 {
			m.file = received(oob[:oobn])
		}
		if n < 3 || flags&unix.MSG_TRUNC != 0 {
			if n >= 3 {
				b.log.Error("m0serve: a bus message was larger than a datagram; dropped", "kind", string(buf[0]))
			}
			closeFile(m.file)
			continue
		}
		m.kind, m.from = buf[0], int(binary.LittleEndian.Uint16(buf[1:]))
		m.body = buf[3:n]
		b.dispatch(m)
	}
}

// received returns the descriptor a message carried, closing any others.
func received(oob []byte) *os.File {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var f *os.File
	for _, cm := range msgs {
		fds, err := unix.ParseUnixRights(&cm)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			if f == nil {
				f = os.NewFile(uintptr(fd), "handed-off")
			} else {
				unix.Close(fd)
			}
		}
	}
	return f
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

func (b *Bus) dispatch(m message) {
	hub := b.hub.Load()
	if hub == nil && (m.kind == kindFrame || m.kind == kindUnnumbered || m.kind == kindJournal || m.kind == kindForward) {
		closeFile(m.file)
		return // a server without channels: nothing to deliver or journal
	}
	switch m.kind {
	case kindFrame:
		if f, ok := parseFrame(m.body, true); ok && realtime.ValidChannel(f.Channel) && len(f.Data) <= realtime.MaxFrame &&
			realtime.ValidEvent(f.Event) {
			f.Data = append([]byte(nil), f.Data...)
			hub.Deliver(f)
			if m.from == fromChild && b.forwarding() && b.firstRunning() {
				b.forward(appendFrame(header(kindFrame, b.self), f))
			}
		}
	case kindUnnumbered:
		if f, ok := parseFrame(m.body, false); ok {
			hub.PublishEvent(f.Channel, f.Event, f.Data) // refused names, events and sizes are counted there
		}
	case kindConn:
		// The sender counted the connection on this worker already, and
		// closed its own descriptor: one that does not arrive, or does
		// not become a connection, is lost, and Lost says so.
		if m.file == nil {
			err := errors.New("the descriptor was not received")
			if m.cut {
				err = errors.New("the descriptor did not fit: out of descriptors")
			}
			b.loses(err)
			return
		}
		c, err := net.FileConn(m.file)
		m.file.Close()
		if err != nil {
			b.loses(err)
			return
		}
		select {
		case b.conns <- c:
		case <-b.done:
			c.Close()
		}
		return
	case kindJournal:
		req := append([]byte(nil), m.body[:min(4, len(m.body))]...) // buf is read into next
		switch {
		case len(req) < 4:
		case m.file != nil: // a successor's: answered to the inbox it carries
			c, err := unixConn(m.file)
			m.file = nil
			if err == nil {
				go func() {
					defer c.Close()
					b.answerJournal(func(a []byte) { b.write(c, a) }, req)
				}()
			}
		case m.from < len(b.out):
			go b.answerJournal(func(a []byte) { b.enqueue(m.from, a) }, req)
		}
	case kindForward:
		if m.file != nil {
			c, err := unixConn(m.file)
			m.file = nil
			if err == nil {
				b.addForward(c)
			}
		}
	case kindMetrics:
		if len(m.body) >= 4 && m.from < len(b.out) {
			ans := append(header(kindMetricsAns, b.self), m.body[:4]...)
			go func() {
				if g := b.gather.Load(); g != nil {
					ans = append(ans, (*g)()...)
				}
				b.enqueue(m.from, ans)
			}()
		}
	case kindJournalFr, kindJournalEnd, kindMetricsAns:
		if len(m.body) < 4 {
			break
		}
		req := binary.LittleEndian.Uint32(m.body)
		b.mu.Lock()
		ch := b.waiting[req]
		b.mu.Unlock()
		if ch != nil {
			m.body = append([]byte(nil), m.body[4:]...)
			select {
			case ch <- m:
			case <-time.After(answerWait): // the asker stopped waiting
			}
		}
	}
	closeFile(m.file)
}

// Conns are the connections siblings handed to this worker.
func (b *Bus) Conns() <-chan net.Conn { return b.conns }

// Lost reports each connection a sibling handed to this worker that it
// could not take (out of descriptors, most often), with why. The sibling
// had counted it here; the connection is closed.
func (b *Bus) Lost() <-chan error { return b.lost }

func (b *Bus) loses(err error) {
	select {
	case b.lost <- err:
	case <-b.done:
	}
}

// Hand passes c to worker i and closes it here. It reports false, leaving
// c open, when it could not.
func (b *Bus) Hand(i int, c net.Conn) bool {
	var werr error
	if err := sock.WithFD(c, func(fd uintptr) {
		_, _, werr = b.out[i].WriteMsgUnix(header(kindConn, b.self), unix.UnixRights(int(fd)), nil)
	}); err != nil || werr != nil {
		return false
	}
	c.Close()
	return true
}

// ask sends a request of kind to worker i and returns where its answers
// arrive, and the function that stops listening for them.
func (b *Bus) ask(kind byte, i int) (<-chan message, func()) {
	return b.request(kind, b.self, func(m []byte) { b.enqueue(i, m) })
}

// request sends, by send, a request of kind from the sender numbered from,
// and returns where its answers arrive and the function that stops
// listening for them.
func (b *Bus) request(kind byte, from int, send func(m []byte)) (<-chan message, func()) {
	req := b.reqs.Add(1)
	ch := make(chan message, 256)
	b.mu.Lock()
	b.waiting[req] = ch
	b.mu.Unlock()
	send(binary.LittleEndian.AppendUint32(header(kind, from), req))
	return ch, func() {
		b.mu.Lock()
		delete(b.waiting, req)
		b.mu.Unlock()
	}
}

// answerJournal sends, by send, this worker's journal, oldest first.
func (b *Bus) answerJournal(send func([]byte), req []byte) {
	hub := b.hub.Load()
	floor, frames := hub.Journal()
	for _, f := range frames {
		send(appendFrame(append(header(kindJournalFr, b.self), req...), f))
	}
	end := append(header(kindJournalEnd, b.self), req...)
	end = binary.LittleEndian.AppendUint64(end, floor.Epoch)
	end = binary.LittleEndian.AppendUint64(end, floor.Seq)
	send(binary.LittleEndian.AppendUint32(end, uint32(len(frames))))
}

// Warm asks worker i for its journal and adds it to the hub's, so that a
// client that reconnects to this worker, a replacement, is replayed what
// it missed rather than sent a gap. It reports whether the whole journal
// arrived before ctx ended.
func (b *Bus) Warm(ctx context.Context, i int) bool {
	ch, stop := b.ask(kindJournal, i)
	defer stop()
	return b.warmFrom(ctx, ch)
}

// Bridge joins this worker, of a server started by SIGUSR2, to the workers
// of the one it replaces, whose inboxes are prior (serving says which of
// them run a worker): each is asked to forward the frames it publishes
// from now on, then for its journal, which the hub adds to its own. A
// worker reads its inbox in order, so what it published before it began
// to forward is in the journal it answers with. A client that resumes
// here from a frame the old server sent is then replayed what it missed.
// It reports whether every journal arrived whole, each given up to wait;
// unless all did, none is added (the hub sends a client that resumes from
// the old server m0-gap, rather than replay it a journal with holes).
func (b *Bus) Bridge(prior []*net.UnixConn, serving func(i int) bool, wait time.Duration) bool {
	var asked []int
	for i, c := range prior {
		if serving(i) && b.carry(c, kindForward, nil) == nil {
			asked = append(asked, i)
		}
	}
	var got []journal
	for _, i := range asked {
		var err error
		ch, stop := b.request(kindJournal, fromSuccessor, func(m []byte) { err = b.carry(prior[i], kindJournal, m) })
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		j, ok := b.journalFrom(ctx, ch)
		cancel()
		stop()
		if err != nil || !ok {
			return false
		}
		got = append(got, j)
	}
	for _, j := range got {
		b.hub.Load().Warm(j.floor, j.frames)
	}
	return len(got) > 0
}

// carry writes m (a header of kind from a successor when nil) to c with
// this worker's inbox attached.
func (b *Bus) carry(c *net.UnixConn, kind byte, m []byte) error {
	if m == nil {
		m = header(kind, fromSuccessor)
	}
	var werr error
	c.SetWriteDeadline(time.Now().Add(forwardWait)) // an old worker that does not read is not waited for
	if err := sock.WithFD(b.out[b.self], func(fd uintptr) {
		werr = b.retry(func() error { _, _, err := c.WriteMsgUnix(m, unix.UnixRights(int(fd)), nil); return err })
	}); err != nil {
		return err
	}
	return werr
}

// warmFrom adds the journal whose messages arrive on ch to the hub's.
func (b *Bus) warmFrom(ctx context.Context, ch <-chan message) bool {
	j, ok := b.journalFrom(ctx, ch)
	if ok {
		b.hub.Load().Warm(j.floor, j.frames)
	}
	return ok
}

// journal is a journal another worker answered with.
type journal struct {
	floor  realtime.ID
	frames []*realtime.Frame
}

// journalFrom gathers the journal whose messages arrive on ch; ok is
// false when not all of it arrived before ctx ended.
func (b *Bus) journalFrom(ctx context.Context, ch <-chan message) (j journal, ok bool) {
	for {
		select {
		case m := <-ch:
			if m.kind == kindJournalEnd {
				if len(m.body) < 20 || int(binary.LittleEndian.Uint32(m.body[16:])) != len(j.frames) {
					return j, false // not all of it arrived: a journal with holes would replay them as none
				}
				j.floor = realtime.ID{Epoch: binary.LittleEndian.Uint64(m.body), Seq: binary.LittleEndian.Uint64(m.body[8:])}
				return j, true
			}
			if f, ok := parseFrame(m.body, true); ok {
				j.frames = append(j.frames, f)
			}
		case <-ctx.Done():
			return j, false
		}
	}
}

// ServeMetrics sets what this worker answers a sibling's request for its
// metrics with: its exposition, as gather returns it.
func (b *Bus) ServeMetrics(gather func() []byte) { b.gather.Store(&gather) }

// Metrics asks each worker in ask for its metrics and returns the answers
// that came before ctx ended, by worker.
func (b *Bus) Metrics(ctx context.Context, ask []int) map[int][]byte {
	type asked struct {
		ch   <-chan message
		stop func()
	}
	var all []asked
	var asking []int
	for _, i := range ask {
		if !b.runs(i) {
			continue // a spare slot: no worker to answer
		}
		ch, stop := b.ask(kindMetrics, i)
		all = append(all, asked{ch, stop})
		asking = append(asking, i)
	}
	got := map[int][]byte{}
	for k, a := range all {
		select {
		case m := <-a.ch:
			got[asking[k]] = m.body
		case <-ctx.Done():
		}
		a.stop()
	}
	return got
}

// runs reports whether slot i runs a worker.
func (b *Bus) runs(i int) bool { return b.inUse == nil || b.inUse(i) }

// Self is this worker's number.
func (b *Bus) Self() int { return b.self }

// Workers is how many workers the mesh joins.
func (b *Bus) Workers() int { return len(b.out) }

// answerWait bounds how long the bus's reader waits for whoever asked to
// take an answer.
const answerWait = time.Second
