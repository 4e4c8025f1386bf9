package prefork

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/m0serve/m0/realtime"
	"golang.org/x/sys/unix"
)

// dup returns a descriptor of its own for f, as an exec'd worker has.
func dup(t *testing.T, f *os.File) *os.File {
	t.Helper()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), f.Name())
}

// meshOf makes a mesh of n workers in this process: each its own page
// mapping, bus and hub, as n exec'd workers would have.
func meshOf(t *testing.T, n int) (*Mesh, []*Worker, []*realtime.Hub) {
	return meshAfter(t, n, nil)
}

// meshAfter is meshOf for a server SIGUSR2 started to replace the one
// prior is of: the page numbers on from prior's, each worker holds prior
// to bridge to.
func meshAfter(t *testing.T, n int, prior *Prior) (*Mesh, []*Worker, []*realtime.Hub) {
	t.Helper()
	m, err := NewMesh(nil, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if prior != nil {
		if err := m.Follow(prior); err != nil {
			t.Fatal(err)
		}
	}
	var ws []*Worker
	var hubs []*realtime.Hub
	for i := range n {
		page, err := OpenPage(dup(t, m.Page.File()))
		if err != nil {
			t.Fatal(err)
		}
		var out []*os.File
		for _, f := range m.outboxes {
			out = append(out, dup(t, f))
		}
		bus, err := NewBus(i, dup(t, m.inboxes[i]), out)
		if err != nil {
			t.Fatal(err)
		}
		w := &Worker{Index: i, Workers: n, Page: page, Bus: bus}
		page.SetInUse(i, true)
		page.SetServing(i, os.Getpid())
		if m.prior != nil {
			if err := w.inheritPrior(m.prior); err != nil {
				t.Fatal(err)
			}
		}
		hub := realtime.New(&realtime.Options{ReplayFrames: 16, IDs: page, Bus: bus})
		bus.Start(hub)
		t.Cleanup(func() { bus.Close(); page.Close() })
		ws, hubs = append(ws, w), append(hubs, hub)
	}
	return m, ws, hubs
}

func next(t *testing.T, s *realtime.Subscription) *realtime.Frame {
	t.Helper()
	select {
	case f := <-s.C():
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no frame arrived")
		return nil
	}
}

// TestPageIDs: ids taken from two mappings of the page at once are unique
// and end at their number; the epoch is shared.
func TestPageIDs(t *testing.T) {
	a, err := NewPage()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenPage(dup(t, a.File()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for _, p := range []*Page{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				id := p.Next()
				mu.Lock()
				if seen[id.Seq] || id.Epoch != a.epoch() {
					t.Errorf("id %v twice or of another epoch", id)
				}
				seen[id.Seq] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n := b.Newest(); n.Seq != 2000 || len(seen) != 2000 {
		t.Fatalf("newest %v after %d ids", n, len(seen))
	}
	if _, err := OpenPage(dup(t, os.Stdin)); err == nil {
		t.Fatal("a descriptor that is no page was taken for one")
	}
}

// TestBusFrames: a frame published on one worker reaches the subscribers
// of every other, with its id; an unnumbered frame a child writes is
// numbered by the worker that reads it and reaches them all.
func TestBusFrames(t *testing.T) {
	m, _, hubs := meshOf(t, 3)
	var subs []*realtime.Subscription
	for _, h := range hubs {
		s, err := h.Subscribe("news", false, "")
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	id, ok := hubs[1].Publish("news", []byte("hello"))
	if !ok {
		t.Fatal("refused")
	}
	for i, s := range subs {
		if f := next(t, s); f.ID != id || string(f.Data) != "hello" {
			t.Fatalf("worker %d got %v %q", i, f.ID, f.Data)
		}
	}
	// A child's unnumbered frame, written to worker 0's inbox.
	msg := []byte{kindUnnumbered, 0xff, 0xff}
	msg = binary.LittleEndian.AppendUint16(msg, 4)
	msg = append(append(msg, "news"...), "from a child"...)
	if _, err := unix.Write(int(m.outboxes[0].Fd()), msg); err != nil {
		t.Fatal(err)
	}
	var got realtime.ID
	for i, s := range subs {
		f := next(t, s)
		if string(f.Data) != "from a child" || f.ID.Seq != id.Seq+1 || (i > 0 && f.ID != got) {
			t.Fatalf("worker %d got %v %q", i, f.ID, f.Data)
		}
		got = f.ID
	}
	// A numbered frame with a bad channel is dropped, not delivered.
	bad := appendFrame(header(kindFrame, fromChild), &realtime.Frame{ID: realtime.ID{Epoch: id.Epoch, Seq: 99}, Channel: "\x01reserved", Data: []byte("x")})
	if _, err := unix.Write(int(m.outboxes[2].Fd()), bad); err != nil {
		t.Fatal(err)
	}
	hubs[0].Publish("news", []byte("after"))
	if f := next(t, subs[2]); string(f.Data) != "after" {
		t.Fatalf("worker 2 got %q", f.Data)
	}
}

// TestWarm: a worker that replaces one replays, from its sibling's
// journal, what a client missed before it started.
func TestWarm(t *testing.T) {
	_, ws, hubs := meshOf(t, 2)
	var first realtime.ID
	for i := range 5 {
		id, _ := hubs[0].Publish("c", []byte{byte('a' + i)})
		if i == 0 {
			first = id
		}
	}
	// A hub made now (the replacement) journals from here on only.
	fresh := realtime.New(&realtime.Options{ReplayFrames: 16, IDs: ws[1].Page, Bus: ws[1].Bus})
	ws[1].Bus.hub.Store(fresh) // its reader, started already, delivers to it now
	if s, _ := fresh.Subscribe("c", true, first.String()); s.Gap == nil {
		t.Fatal("a fresh hub replayed what it never saw")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !ws[1].Bus.Warm(ctx, 0) {
		t.Fatal("no journal arrived")
	}
	s, _ := fresh.Subscribe("c", true, first.String())
	if s.Gap != nil || len(s.Replay) != 4 || string(s.Replay[0].Data) != "b" || string(s.Replay[3].Data) != "e" {
		t.Fatalf("after warming: gap %v, replay %d", s.Gap, len(s.Replay))
	}
}

// TestBridge: the workers of a server SIGUSR2 started number from the old
// server's counter, and each server's workers get the other's frames, those
// published before the bridge included: a client resumes on either with
// nothing missed and nothing twice, however their frames interleave.
func TestBridge(t *testing.T) {
	old, _, was := meshOf(t, 2)
	var ids []realtime.ID
	for i := range 6 {
		id, _ := was[i%2].Publish("c", []byte{byte('a' + i)})
		ids = append(ids, id)
	}
	offer := old.Offer()
	prior := &Prior{Page: dup(t, offer.Page), IDs: dup(t, offer.IDs)}
	for _, f := range offer.Inboxes {
		prior.Inboxes = append(prior.Inboxes, dup(t, f))
	}
	_, ws, hubs := meshAfter(t, 2, prior)
	for i, w := range ws {
		if bridged, whole := w.Bridge(5 * time.Second); !bridged || !whole {
			t.Fatalf("worker %d: bridged %v, whole journal %v", i, bridged, whole)
		}
		if again, _ := w.Bridge(time.Second); again {
			t.Fatal("a second bridge")
		}
	}
	// Both serve: their frames interleave in one sequence.
	for i := range 6 {
		h := was[i%2]
		if i%3 == 1 {
			h = hubs[i%2]
		}
		id, _ := h.Publish("c", []byte{byte('g' + i)})
		if want := ids[len(ids)-1].Seq + 1; id.Epoch != ids[0].Epoch || id.Seq != want {
			t.Fatalf("frame %d numbered %v, want %d in the old epoch", i, id, want)
		}
		ids = append(ids, id)
	}
	// Resumed from the old server's third frame, on each server.
	want := "defghijkl"
	for k, h := range append(append([]*realtime.Hub{}, hubs...), was...) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			s, err := h.Subscribe("c", true, ids[2].String())
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, f := range s.Replay {
				got += string(f.Data)
			}
			s.Close()
			if s.Gap == nil && got == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("hub %d: resumed: gap %v, replay %q, want %q", k, s.Gap, got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestMetricsAsked: a worker answers a sibling's request for its metrics
// with what it serves.
func TestMetricsAsked(t *testing.T) {
	_, ws, _ := meshOf(t, 3)
	ws[1].Bus.ServeMetrics(func() []byte { return []byte("one") })
	ws[2].Bus.ServeMetrics(func() []byte { return []byte("two") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := ws[0].Bus.Metrics(ctx, []int{1, 2})
	if string(got[1]) != "one" || string(got[2]) != "two" {
		t.Fatalf("got %q and %q", got[1], got[2])
	}
}

// TestHandoff: the worker that accepts keeps connections while its
// sibling has no fewer than Margin less open, and hands the next to it;
// the handed connection serves there and counts there until it closes.
// echoMesh is two balanced workers whose servers answer a line with
// "wN:" and the line: worker 0 accepts from the listener ask dials,
// worker 1 only what is handed to it; ls are their balanced listeners.
// ask returns the connection and its answer, or the error reading it
// (deadline 5 s).
func echoMesh(t *testing.T) (ws []*Worker, ls []net.Listener, ask func() (net.Conn, string, error)) {
	ws, ls, ask, _ = echoMeshHooked(t)
	return ws, ls, ask
}

// acceptHook is a listener that calls after, when set, with each
// connection it accepts, before the balancer places it.
type acceptHook struct {
	net.Listener
	after atomic.Pointer[func(net.Conn)]
}

func (l *acceptHook) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if f := l.after.Load(); err == nil && f != nil {
		(*f)(c)
	}
	return c, err
}

// echoMeshHooked is echoMesh with worker 0's listener's accept hook.
func echoMeshHooked(t *testing.T) (ws []*Worker, ls []net.Listener, ask func() (net.Conn, string, error), hook *acceptHook) {
	t.Helper()
	_, ws, _ = meshOf(t, 2)
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &acceptHook{Listener: tcp}
	hook = ln
	idle, err := net.Listen("tcp4", "127.0.0.1:0") // worker 1 accepts nothing itself
	if err != nil {
		t.Fatal(err)
	}
	ls = []net.Listener{ws[0].Balance(ln, false), ws[1].Balance(idle, false)}
	for i, l := range ls {
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					line, _ := bufio.NewReader(c).ReadString('\n')
					io.WriteString(c, fmt.Sprintf("w%d:%s", i, line))
				}()
			}
		}()
	}
	return ws, ls, func() (net.Conn, string, error) {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "hi\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		return c, line, err
	}, hook
}

func TestHandoff(t *testing.T) {
	ws, ls, try := echoMesh(t)
	ask := func() (net.Conn, string) {
		c, line, err := try()
		if err != nil {
			t.Fatal(err)
		}
		return c, line
	}
	var got []string
	var conns []net.Conn
	for range 4 {
		c, line := ask()
		conns = append(conns, c)
		got = append(got, line)
	}
	// 0 open vs 0: kept; 1 vs 0: kept; 2 vs 0: handed; 2 vs 1: kept.
	want := []string{"w0:hi\n", "w0:hi\n", "w1:hi\n", "w0:hi\n"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("answers %q, want %q", got, want)
		}
	}
	if o0, o1 := ws[0].Page.Open(0).Load(), ws[0].Page.Open(1).Load(); o0 != 3 || o1 != 1 {
		t.Fatalf("open %d and %d, want 3 and 1", o0, o1)
	}
	// Worker 1 stops taking connections: nothing more is handed to it.
	ls[1].Close()
	for range 3 {
		c, line := ask()
		conns = append(conns, c)
		if line != "w0:hi\n" {
			t.Fatalf("a connection went to a worker that stopped: %q", line)
		}
	}
	for _, c := range conns {
		c.Close()
	}
}

// FuzzParseFrame: any datagram body parses to a frame within it, or to
// none, and a frame written parses back whole.
func FuzzParseFrame(f *testing.F) {
	f.Add(appendFrame(nil, &realtime.Frame{ID: realtime.ID{Epoch: 7, Seq: 42}, Channel: "news", Data: []byte("hello")}), true)
	f.Add(appendFrame(nil, &realtime.Frame{ID: realtime.ID{Epoch: 7, Seq: 43}, Channel: "news", Event: "tick", Data: []byte("hello")}), true)
	f.Add([]byte{4, 0, 'n', 'e', 'w', 's', 'x'}, false)
	f.Add([]byte{4, 0x80, 'n', 'e', 'w', 's', 2, 'e', 'v', 'x'}, false)
	f.Add([]byte{0xff, 0xff}, false)
	f.Fuzz(func(t *testing.T, body []byte, numbered bool) {
		fr, ok := parseFrame(body, numbered)
		if !ok {
			return
		}
		if len(fr.Channel)+len(fr.Event)+len(fr.Data) > len(body) {
			t.Fatalf("a frame larger than its datagram: %d+%d+%d of %d", len(fr.Channel), len(fr.Event), len(fr.Data), len(body))
		}
		enc := appendFrame(nil, fr)
		if !numbered {
			enc = enc[16:] // no id
		}
		again, ok := parseFrame(enc, numbered)
		if !ok || again.ID != fr.ID && numbered || again.Channel != fr.Channel || again.Event != fr.Event || string(again.Data) != string(fr.Data) {
			t.Fatalf("%+v did not parse back: %+v", fr, again)
		}
	})
}

// TestHandoffOutOfDescriptors: a connection handed to a worker with no
// descriptor left for it is lost, once: the worker's count falls back,
// its siblings hand it nothing for FullPause and keep what they accept,
// and then hand it connections again.
func TestHandoffOutOfDescriptors(t *testing.T) {
	old := FullPause
	FullPause = time.Hour // the test ends it (endPause), when it has looked
	defer func() { FullPause = old }()
	ws, ls, ask, hook := echoMeshHooked(t)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 2 { // 0 vs 0, then 1 vs 0: both kept by worker 0
		c, line, err := ask()
		if err != nil || line != "w0:hi\n" {
			t.Fatalf("answered %q, %v", line, err)
		}
		conns = append(conns, c)
	}

	// Worker 1 must find no descriptor free for the connection worker 0
	// hands it (2 vs 0). The workers share this process's descriptor
	// table, and worker 0 closes its copy once it has sent it, so a slot
	// taken in advance would be free again for worker 1 whenever it reads
	// after that close (and any descriptor closed meanwhile, a finalizer's,
	// would be one too). So once worker 0 has accepted the connection, and
	// before it hands it, the process's limit is lowered to no descriptor
	// at all, until the client has its answer.
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	var limErr error
	lowered := make(chan struct{})
	none := func(net.Conn) {
		defer close(lowered)
		zero := lim
		zero.Cur = 0
		limErr = unix.Setrlimit(unix.RLIMIT_NOFILE, &zero)
	}
	hook.after.Store(&none)
	c, line, err := ask()
	hook.after.Store(nil)
	select {
	case <-lowered:
	case <-time.After(5 * time.Second):
		t.Fatal("worker 0 did not accept the connection")
	}
	unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	if limErr != nil {
		t.Skipf("cannot lower the descriptor limit: %v", limErr)
	}
	if err == nil {
		t.Fatalf("a connection handed to a worker out of descriptors was answered %q", line)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for ws[0].Page.Takes(1) || ws[0].Page.Open(1).Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("worker 1 takes %v with %d open, want a pause with 0", ws[0].Page.Takes(1), ws[0].Page.Open(1).Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !ws[0].Page.Serving(1) {
		t.Fatal("worker 1 paused taking connections reads as not serving")
	}
	c, line, err = ask() // 2 vs 0, but worker 1 is paused: kept
	if err != nil || line != "w0:hi\n" {
		t.Fatalf("during the pause: answered %q, %v", line, err)
	}
	conns = append(conns, c)
	ls[1].(*balancer).endPause <- struct{}{} // as its timer would
	for !ws[0].Page.Takes(1) {
		if time.Now().After(deadline) {
			t.Fatal("worker 1 takes no handed connection after the pause")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c, line, err = ask() // 3 vs 0: handed
	if err != nil || line != "w1:hi\n" {
		t.Fatalf("after the pause: answered %q, %v", line, err)
	}
	conns = append(conns, c)
}

// TestBudgetedAccept: a worker at its descriptor budget accepts nothing,
// failing as out of descriptors, and leaves the connection in the
// listener's queue, where it waits until a connection closes.
func TestBudgetedAccept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var open atomic.Int64
	open.Store(3)
	l := budgeted{Listener: ln, open: &open, max: 3}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := l.Accept(); err == nil || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("at the budget: accepted %v, %v; want a failure as out of descriptors", got, err)
	}
	open.Store(2) // a connection closed
	got, err := l.Accept()
	if err != nil {
		t.Fatalf("under the budget: %v", err)
	}
	defer got.Close()
	if got.RemoteAddr().String() != c.LocalAddr().String() {
		t.Fatalf("accepted %v, want the connection that waited, %v", got.RemoteAddr(), c.LocalAddr())
	}
}

// TestLeastLeavesRoom: a sibling whose open connections reach the room
// its descriptor budget leaves is handed nothing.
func TestLeastLeavesRoom(t *testing.T) {
	ws, ls, _, _ := echoMeshHooked(t)
	b := ls[0].(*balancer)
	if j := b.least(); j != 1 {
		t.Fatalf("least = %d, want the sibling 1", j)
	}
	b.room = ws[0].Page.Open(1).Load()
	if j := b.least(); j != -1 {
		t.Fatalf("with the sibling at its room: least = %d, want none", j)
	}
}
