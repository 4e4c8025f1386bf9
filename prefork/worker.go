package prefork

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/m0serve/m0/internal/sock"
	"golang.org/x/sys/unix"
)

// maxListeners bounds the listeners a worker inherits.
const maxListeners = 64

// WorkerEnv names a worker to itself: "N/WORKERS", then "/prepare" or
// "/replaced" when SpawnOptions say so. A worker reads it and removes it
// from its environment, so that nothing it starts takes it for one.
const WorkerEnv = "M0_PREFORK_WORKER"

// BusEnv tells a child process of a worker where the page and the bus are:
// "page=FD:INODE;bus=FD:INODE,FD:INODE,..." (one bus descriptor per
// worker, in order). m0serve.m0pub reads it in a child that was passed the
// descriptors (pass_fds=m0pub.child_fds()), and checks each descriptor's
// inode, so that a number the child reused for something else is not
// written to.
const BusEnv = "M0_BUS"

// The descriptors a worker inherits, in order from 3.
const (
	fdListener = 3 + iota
	fdPage
	fdControl
	fdInbox
	fdBus // then one per worker
)

// Control messages on a worker's control socket, a stream (macOS has no
// SOCK_SEQPACKET), each sent whole with its length before it (sendCtrl).
const (
	msgReady    = "ready"
	msgPrepared = "prepared"
	msgFailed   = "failed " // then the exit code, a newline and the text
	msgDue      = "due "    // then the reason (ReplacementReasons), a space, and why the worker asks to be replaced
	msgGo       = "go"
)

// Mesh is what the supervisor makes once and every worker inherits: the
// listeners, the page, and each worker's inbox with its write end.
type Mesh struct {
	Listener *os.File
	// More are the listeners after the first (several --bind places):
	// each worker serves them all.
	More     []*os.File
	Page     *Page
	inboxes  []*os.File // read ends, kept for replacements
	outboxes []*os.File // write ends
	priorMu  sync.Mutex
	prior    *Prior // Follow's
}

// NewMesh makes the page and an inbox per worker, around the listener's
// descriptor and any more listeners'.
func NewMesh(listener *os.File, workers int, more ...*os.File) (*Mesh, error) {
	if workers > MaxWorkers {
		return nil, fmt.Errorf("prefork: at most %d workers", MaxWorkers)
	}
	page, err := NewPage()
	if err != nil {
		return nil, err
	}
	m := &Mesh{Listener: listener, More: more, Page: page}
	for range workers {
		in, out, err := socketpair(unix.SOCK_DGRAM)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.inboxes = append(m.inboxes, in)
		m.outboxes = append(m.outboxes, out)
	}
	return m, nil
}

func socketpair(typ int) (*os.File, *os.File, error) {
	fds, err := socketpairs(typ)
	if err != nil {
		return nil, nil, fmt.Errorf("prefork: %w", err)
	}
	for _, fd := range fds {
		if typ == unix.SOCK_DGRAM {
			roomForDatagrams(fd)
		}
	}
	return os.NewFile(uintptr(fds[0]), "m0-a"), os.NewFile(uintptr(fds[1]), "m0-b"), nil
}

// maxCtrl bounds a control message (a failure's text).
const maxCtrl = 256 << 10

// sendCtrl writes m on a control socket, its length first, in one write;
// past maxCtrl, m is cut there (a failure's text, whose end matters least).
func sendCtrl(c net.Conn, m string) error {
	m = m[:min(len(m), maxCtrl)]
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(m)), uint32(len(m)))
	_, err := c.Write(append(b, m...))
	return err
}

// readCtrl reads the next message sendCtrl wrote.
func readCtrl(r *bufio.Reader) (string, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	size := binary.LittleEndian.Uint32(n[:])
	if size > maxCtrl {
		return "", fmt.Errorf("prefork: a control message of %d bytes", size)
	}
	m := make([]byte, size)
	if _, err := io.ReadFull(r, m); err != nil {
		return "", err
	}
	return string(m), nil
}

// Close closes the mesh's descriptors in this process.
func (m *Mesh) Close() {
	m.Unfollow()
	for _, f := range append(m.inboxes, m.outboxes...) {
		f.Close()
	}
	if m.Page != nil {
		m.Page.Close()
	}
}

// Exec returns the Spawner that starts each worker as this binary
// (/proc/self/exe: the one running, even if the file was replaced since)
// with argv and env, its output on stdout and stderr, inheriting the mesh.
// The descriptors are passed as they are: going through os/exec would put
// the shared listener in blocking mode for every worker (os.File.Fd does),
// and a worker blocked in accept could not be drained.
func (m *Mesh) Exec(argv, env []string, stdout, stderr *os.File) Spawner {
	workers := len(m.inboxes)
	self := "/proc/self/exe"
	if _, err := os.Stat(self); err != nil {
		self, _ = os.Executable() // no /proc: the path it was started by
	}
	return func(slot int, opts SpawnOptions, report func(Event)) (Proc, error) {
		mine, theirs, err := socketpair(unix.SOCK_STREAM)
		if err != nil {
			return nil, err
		}
		defer theirs.Close()
		name := fmt.Sprintf("%d/%d", slot, workers)
		if opts.Prepare {
			name += "/prepare"
		}
		if opts.Replaced {
			name += "/replaced"
		}
		if len(m.More) > 0 {
			name += fmt.Sprintf("/listeners=%d", 1+len(m.More))
		}
		files := []*os.File{os.Stdin, stdout, stderr, m.Listener, m.Page.File(), theirs, m.inboxes[slot]}
		files = append(append(files, m.outboxes...), m.More...)
		if ids := m.Page.ids; ids != nil {
			name += "/ids"
			files = append(files, ids.File())
		}
		m.priorMu.Lock()
		if p := m.prior; p != nil {
			name += fmt.Sprintf("/prior=%d", len(p.Inboxes))
			files = append(append(files, p.Page), p.Inboxes...)
		}
		var fds []uintptr
		for _, f := range files {
			fd, err := rawFd(f)
			if err != nil {
				m.priorMu.Unlock()
				mine.Close()
				return nil, fmt.Errorf("prefork: %s: %w", f.Name(), err)
			}
			fds = append(fds, fd)
		}
		pid, err := syscall.ForkExec(self, argv, &syscall.ProcAttr{
			Env:   append(append([]string{}, env...), WorkerEnv+"="+name),
			Files: fds,
		})
		m.priorMu.Unlock() // Unfollow closed nothing the fork was passing
		if err != nil {
			mine.Close()
			return nil, fmt.Errorf("prefork: starting worker %d: %w", slot, err)
		}
		proc, _ := os.FindProcess(pid) // always found on Unix
		ctrl, err := ctrlConn(mine)
		if err != nil {
			proc.Kill()
			proc.Wait()
			return nil, err
		}
		p := &execProc{proc: proc, ctrl: ctrl}
		go p.watch(report)
		return p, nil
	}
}

// rawFd is f's descriptor, without os.File.Fd's switch to blocking mode.
func rawFd(f *os.File) (uintptr, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var fd uintptr
	if err := rc.Control(func(d uintptr) { fd = d }); err != nil {
		return 0, err
	}
	return fd, nil
}

func ctrlConn(f *os.File) (*net.UnixConn, error) {
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	u, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("prefork: the control descriptor is not a unix socket")
	}
	return u, nil
}

type execProc struct {
	proc *os.Process
	ctrl *net.UnixConn
}

func (p *execProc) Pid() int                        { return p.proc.Pid }
func (p *execProc) Signal(sig syscall.Signal) error { return p.proc.Signal(sig) }
func (p *execProc) Go() error                       { return sendCtrl(p.ctrl, msgGo) }

// readLeftovers is how long, once the worker has exited, its last messages
// are read for: the control socket may stay open in a process it forked.
const readLeftovers = 100 * time.Millisecond

// watch reports the worker's messages, then its exit: when the process
// ends, whoever else holds its control socket.
func (p *execProc) watch(report func(Event)) {
	read := make(chan struct{})
	go func() {
		defer close(read)
		r := bufio.NewReader(p.ctrl)
		for {
			m, err := readCtrl(r)
			if err != nil {
				return
			}
			switch {
			case m == msgReady:
				report(Event{Kind: Ready})
			case m == msgPrepared:
				report(Event{Kind: Prepared})
			case strings.HasPrefix(m, msgDue):
				reason, why, _ := strings.Cut(m[len(msgDue):], " ")
				report(Event{Kind: Due, Reason: reason, Text: why})
			case strings.HasPrefix(m, msgFailed):
				code, text, _ := strings.Cut(m[len(msgFailed):], "\n")
				c, err := strconv.Atoi(code)
				if err != nil {
					c = 1
				}
				report(Event{Kind: Failed, Code: c, Text: text})
			}
		}
	}()
	state, err := p.proc.Wait()
	status := "exited"
	if err == nil {
		status = state.String()
	}
	p.ctrl.SetReadDeadline(time.Now().Add(readLeftovers)) // what it sent before it ended is read
	<-read
	p.ctrl.Close()
	report(Event{Kind: Exited, Status: status})
}

// Worker is what a worker process inherited from its supervisor: which
// worker it is, the listener, the page and the bus.
type Worker struct {
	// Index is this worker's slot; Workers the mesh's slots, spare ones
	// (for SIGTTIN) included: Live counts those that run a worker.
	Index, Workers int
	// Replaced: this worker replaces one that died; warm the journal from
	// a sibling before serving.
	Replaced bool
	// Prepare: report Prepared once the application is loaded, and serve
	// only when Prepared returns.
	Prepare  bool
	Listener net.Listener
	// Listeners are the listeners Listener serves, each: one, or one per
	// place the supervisor listens on.
	Listeners []net.Listener
	Page      *Page
	Bus       *Bus

	// The server this one replaces (SIGUSR2), until Bridge.
	bridge *bridgeTo

	ctrl    *net.UnixConn // nil in a process without a supervisor
	goCh    chan struct{}
	gone    chan struct{}
	goOnce  sync.Once
	writeMu sync.Mutex
}

// Live is how many of the mesh's slots run a worker now.
func (w *Worker) Live() int { return w.Page.Live(w.Workers) }

// Inherited returns what this process inherited as a worker, or nil when
// it is not one.
func Inherited() (*Worker, error) {
	name, ok := os.LookupEnv(WorkerEnv)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(WorkerEnv)
	parts := strings.Split(name, "/")
	if len(parts) < 2 {
		return nil, fmt.Errorf("prefork: %s=%q is not N/WORKERS", WorkerEnv, name)
	}
	w := &Worker{goCh: make(chan struct{}), gone: make(chan struct{})}
	var err1, err2 error
	w.Index, err1 = strconv.Atoi(parts[0])
	w.Workers, err2 = strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || w.Workers < 1 || w.Workers > MaxWorkers || w.Index < 0 || w.Index >= w.Workers {
		return nil, fmt.Errorf("prefork: %s=%q is not N/WORKERS", WorkerEnv, name)
	}
	listeners, priors, ids := 1, -1, false
	for _, p := range parts[2:] {
		ids = ids || p == "ids"
		if n, ok := strings.CutPrefix(p, "prior="); ok {
			if k, err := strconv.Atoi(n); err == nil && k >= 0 && k <= MaxWorkers {
				priors = k
			} else {
				return nil, fmt.Errorf("prefork: %s=%q names no count of prior inboxes", WorkerEnv, name)
			}
		}
		w.Prepare = w.Prepare || p == "prepare"
		w.Replaced = w.Replaced || p == "replaced"
		if n, ok := strings.CutPrefix(p, "listeners="); ok {
			if k, err := strconv.Atoi(n); err == nil && k >= 1 && k <= maxListeners {
				listeners = k
			} else {
				return nil, fmt.Errorf("prefork: %s=%q names no count of listeners", WorkerEnv, name)
			}
		}
	}
	end := fdBus + w.Workers + listeners - 1
	if ids {
		end++
	}
	if priors >= 0 {
		end += 1 + priors
	}
	for fd := fdListener; fd < end; fd++ {
		unix.CloseOnExec(fd) // nothing the worker starts holds them unless passed
	}
	fds := []int{fdListener}
	for i := 1; i < listeners; i++ {
		fds = append(fds, fdBus+w.Workers+i-1)
	}
	for _, fd := range fds {
		lf := os.NewFile(uintptr(fd), "listener")
		ln, err := net.FileListener(lf)
		lf.Close()
		if err != nil {
			return nil, fmt.Errorf("prefork: the inherited listener: %w", err)
		}
		w.Listeners = append(w.Listeners, ln)
	}
	w.Listener = sock.Merge(w.Listeners...)
	var err error
	if w.Page, err = OpenPage(os.NewFile(fdPage, "m0-page")); err != nil {
		return nil, err
	}
	if w.ctrl, err = ctrlConn(os.NewFile(fdControl, "m0-control")); err != nil {
		return nil, err
	}
	var out []*os.File
	for i := range w.Workers {
		out = append(out, os.NewFile(uintptr(fdBus+i), "m0-bus"))
	}
	if w.Bus, err = NewBus(w.Index, os.NewFile(fdInbox, "m0-inbox"), out); err != nil {
		return nil, err
	}
	w.Bus.inUse = w.Page.InUse
	if ids {
		at := fdBus + w.Workers + listeners - 1
		prior := &Prior{IDs: os.NewFile(uintptr(at), "m0-ids")}
		if priors >= 0 {
			prior.Page = os.NewFile(uintptr(at+1), "m0-prior-page")
			for i := range priors {
				prior.Inboxes = append(prior.Inboxes, os.NewFile(uintptr(at+2+i), "m0-prior-bus"))
			}
		}
		err := w.inheritPrior(prior)
		prior.Close()
		if err != nil {
			return nil, err
		}
	}
	go w.watch()
	return w, nil
}

// Local returns the page and a bus of one for a server without a
// supervisor, so that a child process can publish to it as to a worker.
// prior, unless nil, is the server this one replaces (SIGUSR2): the page
// numbers on from its, and Bridge joins it. Local takes prior.
func Local(prior *Prior) (*Worker, error) {
	page, err := NewPage()
	if err != nil {
		prior.Close()
		return nil, err
	}
	page.SetInUse(0, true)
	page.SetServing(0, os.Getpid()) // a successor bridges to slot 0
	w := &Worker{Workers: 1, Page: page, goCh: make(chan struct{}), gone: make(chan struct{})}
	if prior != nil {
		err := w.inheritPrior(prior)
		prior.Close()
		if err != nil {
			page.Close()
			return nil, err
		}
	}
	in, out, err := socketpair(unix.SOCK_DGRAM)
	if err != nil {
		w.Unbridged()
		page.Close()
		return nil, err
	}
	bus, err := NewBus(0, in, []*os.File{out}) // takes in and out, closing them on an error
	if err != nil {
		w.Unbridged()
		page.Close()
		return nil, err
	}
	w.Bus = bus
	return w, nil
}

// watch reads the supervisor's messages; when the supervisor is gone (the
// socket closes) the worker is told through Gone.
func (w *Worker) watch() {
	r := bufio.NewReader(w.ctrl)
	for {
		m, err := readCtrl(r)
		if err != nil {
			close(w.gone)
			return
		}
		if m == msgGo {
			w.goOnce.Do(func() { close(w.goCh) })
		}
	}
}

// Gone is closed when the supervisor has gone (killed, say): the worker
// then drains itself. It never closes in a process without a supervisor.
func (w *Worker) Gone() <-chan struct{} { return w.gone }

func (w *Worker) tell(m string) {
	if w.ctrl == nil {
		return
	}
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	sendCtrl(w.ctrl, m)
}

// Ready tells the supervisor the worker serves.
func (w *Worker) Ready() { w.tell(msgReady) }

// Due asks the supervisor to replace this worker: reason is what the
// replacement is counted as (ReplacementReasons), why is said in its log
// line. The worker serves on until it is told to drain.
func (w *Worker) Due(reason, why string) { w.tell(msgDue + reason + " " + why) }

// maxFailure bounds the text of a failure sent to the supervisor.
const maxFailure = 128 << 10

// Failed tells the supervisor the worker could not start: the exit code
// and what it would have printed, which the supervisor prints once.
func (w *Worker) Failed(code int, text string) {
	if len(text) > maxFailure {
		text = text[:maxFailure]
	}
	w.tell(msgFailed + strconv.Itoa(code) + "\n" + text)
}

// Prepared tells the supervisor the application is loaded, and waits for
// it to say serve (true) or for stop to close or the supervisor to go
// (false).
func (w *Worker) Prepared(stop <-chan struct{}) bool {
	w.tell(msgPrepared)
	select {
	case <-w.goCh:
		return true
	case <-stop:
	case <-w.gone:
	}
	return false
}

// SetChildEnv puts BusEnv in the process's environment, for the child
// processes the application starts.
func (w *Worker) SetChildEnv() error {
	v, err := w.childEnv()
	if err != nil {
		return err
	}
	return os.Setenv(BusEnv, v)
}

func (w *Worker) childEnv() (string, error) {
	var b bytes.Buffer
	b.WriteString("page=")
	if err := fdIno(&b, int(w.Page.IDs().File().Fd())); err != nil { // the counter a child numbers from
		return "", err
	}
	b.WriteString(";bus=")
	for i, c := range w.Bus.out {
		if i > 0 {
			b.WriteByte(',')
		}
		rc, err := c.SyscallConn()
		if err != nil {
			return "", err
		}
		var ferr error
		if err := rc.Control(func(fd uintptr) { ferr = fdIno(&b, int(fd)) }); err != nil {
			return "", err
		}
		if ferr != nil {
			return "", ferr
		}
	}
	return b.String(), nil
}

func fdIno(b *bytes.Buffer, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	fmt.Fprintf(b, "%d:%d", fd, st.Ino)
	return nil
}

// Supervised reports whether a supervisor started this worker.
func (w *Worker) Supervised() bool { return w.ctrl != nil }
