package prefork

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A server started by SIGUSR2 serves beside the one it replaces until that
// one has drained, and a client whose held stream the old server ends
// resumes on the new one. For the new server to replay what it missed,
// the two serve as the workers of one server do: the old server hands on
// its page, the page its ids are numbered from and its workers' inboxes (a
// Prior); the new one numbers from the same counter (Page.Share), and each
// of its workers, before it is ready, asks every worker of the old server
// to forward it the frames it publishes from then on, takes one old
// worker's journal, and forwards its own frames to the old workers
// (Worker.Bridge), until they are gone.

// Prior is what a server hands the one SIGUSR2 starts to replace it.
type Prior struct {
	Page    *os.File   // its page: which slots run a worker
	IDs     *os.File   // the page its ids are numbered from (Page.IDs)
	Inboxes []*os.File // its workers' inboxes (the write ends), by slot
}

// Close closes the descriptors.
func (p *Prior) Close() {
	if p == nil {
		return
	}
	closeFile(p.Page)
	closeFile(p.IDs)
	for _, f := range p.Inboxes {
		closeFile(f)
	}
}

// bridgeTo is what a worker of the new server holds of the old one until
// it bridges: its page, mapped, and its workers' inboxes.
type bridgeTo struct {
	page  *Page
	conns []*net.UnixConn
}

func (b *bridgeTo) close() {
	for _, c := range b.conns {
		c.Close()
	}
	b.page.Close()
}

// openPrior maps prior's pages and opens its inboxes, from descriptors of
// their own: the caller still closes prior. ids is the page the ids are
// numbered from.
func openPrior(prior *Prior) (ids *Page, to *bridgeTo, err error) {
	pages := make([]*Page, 2)
	for i, f := range []*os.File{prior.Page, prior.IDs} {
		g, err := dupFile(f)
		if err == nil {
			if pages[i], err = OpenPage(g); err != nil {
				g.Close()
			}
		}
		if err != nil {
			if pages[0] != nil {
				pages[0].Close()
			}
			return nil, nil, err
		}
	}
	to = &bridgeTo{page: pages[0]}
	for _, in := range prior.Inboxes {
		g, err := dupFile(in)
		if err == nil {
			var c *net.UnixConn
			if c, err = unixConn(g); err == nil {
				to.conns = append(to.conns, c)
				continue
			}
		}
		to.close()
		pages[1].Close()
		return nil, nil, err
	}
	return pages[1], to, nil
}

// dupFile returns a descriptor of its own for f, without os.File.Fd's
// switch of the open file to blocking mode: the old server's workers share
// it.
func dupFile(f *os.File) (*os.File, error) {
	if f == nil {
		return nil, errors.New("prefork: a prior server's descriptor is missing")
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var derr error
	if err := rc.Control(func(d uintptr) { fd, derr = unix.FcntlInt(d, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("prefork: a prior server's descriptor: %w", derr)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// Follow makes the mesh a successor's of prior: its page numbers from
// prior's ids, and the workers it starts from now on inherit prior, to
// bridge to its workers, until Unfollow. The mesh takes prior.
func (m *Mesh) Follow(prior *Prior) error {
	ids, to, err := openPrior(prior)
	if err != nil {
		prior.Close()
		return err
	}
	to.close()
	m.Page.Share(ids)
	m.priorMu.Lock()
	m.prior = prior
	m.priorMu.Unlock()
	return nil
}

// Unfollow lets go of the prior server's descriptors: the workers started
// from now on bridge to none (they number from its ids still). The
// supervisor calls it once its workers are ready; it is safe to call more
// than once.
func (m *Mesh) Unfollow() {
	m.priorMu.Lock()
	p := m.prior
	m.prior = nil
	m.priorMu.Unlock()
	p.Close()
}

// inheritPrior takes what a worker inherited of the server its own
// replaces: the ids page, which its page numbers from, and, unless
// absent, the rest to bridge with. It takes nothing of prior.
func (w *Worker) inheritPrior(prior *Prior) error {
	if prior.Page == nil {
		f, err := dupFile(prior.IDs)
		if err != nil {
			return err
		}
		ids, err := OpenPage(f)
		if err != nil {
			f.Close()
			return err
		}
		w.Page.Share(ids)
		return nil
	}
	ids, to, err := openPrior(prior)
	if err != nil {
		return err
	}
	w.Page.Share(ids)
	w.bridge = to
	return nil
}

// Bridge joins the worker's bus to the prior server's workers, if it was
// handed one: each serving old worker is asked to forward its frames here
// from now on, one of them for its journal, which the hub adds to its own
// (each asked given up to wait), and this worker's frames are forwarded to
// every old worker until it is gone. bridged says whether there was a
// prior server, whole whether a journal arrived whole.
func (w *Worker) Bridge(wait time.Duration) (bridged, whole bool) {
	to := w.bridge
	if to == nil {
		return false, false
	}
	w.bridge = nil
	defer to.page.Close()
	whole = w.Bus.Bridge(to.conns, func(i int) bool { return to.page.InUse(i) && to.page.Serving(i) }, wait)
	for i, c := range to.conns {
		if to.page.InUse(i) {
			w.Bus.addForward(c) // the bus closes it
		} else {
			c.Close()
		}
	}
	return true, whole
}

// Unbridged lets go of a prior server's inboxes without bridging (a
// server whose frames go through PostgreSQL, or that journals none).
func (w *Worker) Unbridged() {
	if w.bridge != nil {
		w.bridge.close()
		w.bridge = nil
	}
}

// Offer returns what a successor is to be handed of this process's server
// when it has no supervisor: its pages and its inbox. The caller closes
// them.
func (w *Worker) Offer() (*Prior, error) {
	p := &Prior{}
	var err error
	if p.Page, err = dupFile(w.Page.File()); err == nil {
		if p.IDs, err = dupFile(w.Page.IDs().File()); err == nil {
			var in *os.File
			if in, err = w.Bus.out[w.Bus.self].File(); err == nil {
				p.Inboxes = []*os.File{in}
				return p, nil
			}
		}
	}
	p.Close()
	return nil, err
}

// Offer returns what a successor is to be handed of the mesh: its pages
// and every slot's inbox. The descriptors stay the mesh's.
func (m *Mesh) Offer() *Prior {
	return &Prior{Page: m.Page.File(), IDs: m.Page.IDs().File(), Inboxes: m.outboxes}
}
