package prefork

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/m0serve/m0/internal/proc"
	"github.com/m0serve/m0/realtime"
	"golang.org/x/sys/unix"
)

// The page is one page of shared memory (a memfd) that every worker of a
// server maps, and that a child process a view starts may be handed: the
// event id counter and its epoch, and each worker's load. Its layout, in
// little-endian 64-bit words, is part of the contract with m0serve.m0pub,
// which takes ids from it in a child process:
//
//	0   magic "m0page\x00\x01"
//	8   epoch: the counter's boot epoch, Unix milliseconds
//	16  seq: the newest sequence number allocated; read and written only
//	    under a POSIX write lock (fcntl F_SETLKW) on bytes 16 to 23. A
//	    server started by SIGUSR2 numbers from the old one's page instead
//	    of its own (Share), and names that page to its children
//	64  for each worker i, at 64+16*i: its open connections, and its pid
//	    while it serves (0 otherwise), negated while its siblings are to
//	    hand it no connection (it ran out of descriptors taking one)
//	3968 the slots in use, a bit each (worker i: bit i%64 of word i/64):
//	    the supervisor's, which SIGTTIN and SIGTTOU change
//	4000 the workers replaced, a word for each of ReplacementReasons in
//	    order (the supervisor's count; atomic adds)
const (
	pageSize   = 4096
	offEpoch   = 8
	offSeq     = 16
	offSlots   = 64
	slotSize   = 16
	offInUse   = pageSize - 128
	offReplace = offInUse + 32
	pageMagic  = "m0page\x00\x01"
	MaxWorkers = (offInUse - offSlots) / slotSize // 244
)

// ReplacementReasons are why a supervisor replaces a worker, as the page
// counts them: SIGHUP, --max-requests, --workers-max-rss,
// --workers-lifetime, a death, and every thread stuck past --timeout.
var ReplacementReasons = []string{"sighup", "max-requests", "max-rss", "lifetime", "died", "timeout"}

// Page is the shared page of a server's workers. Its IDs are a
// realtime.IDSource: unique and increasing across every process that maps
// it, and across a worker's replacement.
type Page struct {
	f   *os.File
	mem []byte
	mu  sync.Mutex // one allocation at a time in this process; the fcntl lock orders processes
	ids *Page      // Share's: the page whose counter this one numbers from, nil for its own
}

// NewPage makes a page whose counter starts at 1 in an epoch of now.
func NewPage() (*Page, error) {
	f, err := proc.AnonFile("m0-page")
	if err != nil {
		return nil, fmt.Errorf("prefork: the page: %w", err)
	}
	if err := f.Truncate(pageSize); err != nil {
		f.Close()
		return nil, fmt.Errorf("prefork: sizing the page: %w", err)
	}
	p, err := mapPage(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	copy(p.mem, pageMagic)
	binary.LittleEndian.PutUint64(p.mem[offEpoch:], uint64(time.Now().UnixMilli()))
	return p, nil
}

// OpenPage maps a page made by NewPage in another process, from its
// inherited descriptor. The page takes f.
func OpenPage(f *os.File) (*Page, error) {
	p, err := mapPage(f)
	if err != nil {
		return nil, err
	}
	if string(p.mem[:8]) != pageMagic {
		p.Close()
		return nil, errors.New("prefork: the inherited page is not an m0 page")
	}
	return p, nil
}

func mapPage(f *os.File) (*Page, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("prefork: mapping the page: %w", err)
	}
	return &Page{f: f, mem: mem}, nil
}

// File is the page's descriptor, to pass to a worker.
func (p *Page) File() *os.File { return p.f }

// Share makes p number from the counter of ids, the page of the server
// this one replaces (SIGUSR2), rather than its own: the two servers then
// take their ids from one sequence in one epoch, as the workers of one
// server do, while they serve side by side, and so does a successor of
// this one. p takes ids; it is for a page no process numbers from yet.
func (p *Page) Share(ids *Page) { p.ids = ids }

// IDs is the page whose counter p numbers from: p, or Share's.
func (p *Page) IDs() *Page {
	if p.ids != nil {
		return p.ids
	}
	return p
}

// Close unmaps the page and closes its descriptor.
func (p *Page) Close() error {
	if p.ids != nil {
		p.ids.Close()
	}
	err := unix.Munmap(p.mem)
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (p *Page) word(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&p.mem[off]))
}

func (p *Page) epoch() uint64 { return p.word(offEpoch).Load() }

// lockSeq takes the lock on the counter that every process honours, a
// child's m0pub included; unlockSeq lets it go.
func (p *Page) lockSeq(typ int16) {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: offSeq, Len: 8}
	for {
		err := unix.FcntlFlock(p.f.Fd(), unix.F_SETLKW, &lk)
		switch {
		case err == nil:
			return
		case err != unix.EINTR:
			// ENOLCK, EDEADLK: the kernel's, not a caller's; go on unlocked
			// rather than stop publishing, and say so once.
			lockFailed.Do(func() { slog.Error("m0serve: cannot lock the id page; ids may repeat", "error", err.Error()) })
			return
		}
	}
}

var lockFailed sync.Once

// Next allocates the next id.
func (p *Page) Next() realtime.ID {
	if p.ids != nil {
		return p.ids.Next()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lockSeq(unix.F_WRLCK)
	seq := p.word(offSeq).Add(1)
	p.lockSeq(unix.F_UNLCK)
	return realtime.ID{Epoch: p.epoch(), Seq: seq}
}

// Newest returns the newest id allocated by any process.
func (p *Page) Newest() realtime.ID {
	if p.ids != nil {
		return p.ids.Newest()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lockSeq(unix.F_RDLCK) // a child writes the word with pwrite, not atomically
	seq := p.word(offSeq).Load()
	p.lockSeq(unix.F_UNLCK)
	return realtime.ID{Epoch: p.epoch(), Seq: seq}
}

// Open is worker i's count of open connections, shared with its siblings.
func (p *Page) Open(i int) *atomic.Int64 {
	return (*atomic.Int64)(unsafe.Pointer(&p.mem[offSlots+slotSize*i]))
}

// serving is worker i's pid while it takes handed-off connections, 0
// otherwise.
func (p *Page) serving(i int) *atomic.Int64 {
	return (*atomic.Int64)(unsafe.Pointer(&p.mem[offSlots+slotSize*i+8]))
}

// SetServing marks worker i as serving and taking connections handed to
// it (pid) or not serving (0).
func (p *Page) SetServing(i, pid int) { p.serving(i).Store(int64(pid)) }

// SetTaking marks worker i, serving as pid, as taking connections handed
// to it or not, for a while; a worker that is not serving stays so.
func (p *Page) SetTaking(i, pid int, on bool) {
	if on {
		p.serving(i).CompareAndSwap(-int64(pid), int64(pid))
	} else {
		p.serving(i).CompareAndSwap(int64(pid), -int64(pid))
	}
}

// Takes reports whether worker i serves and takes connections handed to
// it now.
func (p *Page) Takes(i int) bool { return p.serving(i).Load() > 0 }

// SetInUse marks slot i as one the supervisor runs a worker in, or not:
// siblings send nothing to a slot not in use (a spare one, for SIGTTIN).
func (p *Page) SetInUse(i int, on bool) {
	w, bit := p.word(offInUse+8*(i/64)), uint64(1)<<(i%64)
	if on {
		w.Or(bit)
	} else {
		w.And(^bit)
	}
}

// InUse reports whether slot i runs a worker.
func (p *Page) InUse(i int) bool { return p.word(offInUse+8*(i/64)).Load()&(1<<(i%64)) != 0 }

// Live is how many slots of n are in use.
func (p *Page) Live(n int) int {
	live := 0
	for i := range n {
		if p.InUse(i) {
			live++
		}
	}
	return live
}

// Serving reports whether worker i serves: it has begun to take
// connections and not yet to stop.
func (p *Page) Serving(i int) bool { return p.serving(i).Load() != 0 }

// Release clears worker i's slot as the process pid exits, unless another
// process holds it: a reload's new worker that failed leaves the slot of
// the worker that serves on as it is.
func (p *Page) Release(i, pid int) {
	if p.serving(i).CompareAndSwap(int64(pid), 0) || p.serving(i).CompareAndSwap(-int64(pid), 0) || p.serving(i).Load() == 0 {
		p.Open(i).Store(0)
	}
}

// Reset clears worker i's slot, as a worker begins to take connections.
func (p *Page) Reset(i int) {
	p.serving(i).Store(0)
	p.Open(i).Store(0)
}

// CountReplacement counts a worker replaced for reason, one of
// ReplacementReasons (any other is not counted).
func (p *Page) CountReplacement(reason string) {
	for i, r := range ReplacementReasons {
		if r == reason {
			(*atomic.Uint64)(unsafe.Pointer(&p.mem[offReplace+8*i])).Add(1)
		}
	}
}

// Replacements returns the workers replaced so far, by reason.
func (p *Page) Replacements() map[string]uint64 {
	out := make(map[string]uint64, len(ReplacementReasons))
	for i, r := range ReplacementReasons {
		out[r] = (*atomic.Uint64)(unsafe.Pointer(&p.mem[offReplace+8*i])).Load()
	}
	return out
}
