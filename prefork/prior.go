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
// resumes on the new one. For the new server to replay what it missed, the
// two number their frames in one epoch without meeting, and the new one's
// workers hold the old one's frames: the old server hands on its page and
// its workers' inboxes (a Prior); the new one's page numbers on from the
// old one's newest id plus PriorReserve, and each of its workers, before it
// is ready, asks every worker of the old server to forward it the frames
// it has from then on, and one of them for its journal (Bus.Bridge).

// PriorReserve is how far past the newest id of the server it replaces a
// server started by SIGUSR2 begins to number: the old server numbers on
// while it drains, below it, so the ids of the two never meet.
const PriorReserve = 1 << 32

// Prior is what a server hands the one SIGUSR2 starts to replace it: its
// page and its workers' inboxes (the write ends), by slot.
type Prior struct {
	Page    *os.File
	Inboxes []*os.File
}

// Close closes the descriptors.
func (p *Prior) Close() {
	if p == nil {
		return
	}
	closeFile(p.Page)
	for _, f := range p.Inboxes {
		closeFile(f)
	}
}

// Continue makes p number on from the newest id of prior's page, past
// PriorReserve, in its epoch. It is for a page no process numbers from
// yet.
func (p *Page) Continue(prior *Page) {
	id := prior.Newest()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lockSeq(unix.F_WRLCK)
	p.word(offEpoch).Store(id.Epoch)
	p.word(offSeq).Store(id.Seq + PriorReserve)
	p.lockSeq(unix.F_UNLCK)
}

// follow continues page from prior's page, and returns the page mapped
// and the inboxes as connections. It takes nothing of prior: the caller
// still closes it.
func follow(page *Page, prior *Prior) (*Page, []*net.UnixConn, error) {
	f, err := dupFile(prior.Page)
	if err != nil {
		return nil, nil, err
	}
	pp, err := OpenPage(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	var conns []*net.UnixConn
	for _, in := range prior.Inboxes {
		g, err := dupFile(in)
		if err == nil {
			var c *net.UnixConn
			if c, err = unixConn(g); err == nil {
				conns = append(conns, c)
				continue
			}
		}
		for _, c := range conns {
			c.Close()
		}
		pp.Close()
		return nil, nil, err
	}
	if page != nil {
		page.Continue(pp)
	}
	return pp, conns, nil
}

func dupFile(f *os.File) (*os.File, error) {
	if f == nil {
		return nil, errors.New("prefork: a prior server's descriptor is missing")
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("prefork: a prior server's descriptor: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// Follow makes the mesh a successor's of prior: its page numbers on from
// prior's, and the workers it starts from now on inherit prior, to bridge
// to its workers, until Unfollow. The mesh takes prior.
func (m *Mesh) Follow(prior *Prior) error {
	pp, conns, err := follow(m.Page, prior)
	if err != nil {
		prior.Close()
		return err
	}
	for _, c := range conns {
		c.Close()
	}
	pp.Close()
	m.priorMu.Lock()
	m.prior = prior
	m.priorMu.Unlock()
	return nil
}

// Unfollow lets go of the prior server's descriptors: the workers started
// from now on bridge to none. The supervisor calls it once its workers are
// ready; it is safe to call more than once.
func (m *Mesh) Unfollow() {
	m.priorMu.Lock()
	p := m.prior
	m.prior = nil
	m.priorMu.Unlock()
	p.Close()
}

// Bridge joins the worker's bus to the prior server's workers, if it was
// handed one (Bus.Bridge), and lets go of what it was handed. bridged
// says whether there was one, whole whether a journal arrived whole.
func (w *Worker) Bridge(wait time.Duration) (bridged, whole bool) {
	if w.priorPage == nil {
		return false, false
	}
	page, conns := w.priorPage, w.prior
	w.priorPage, w.prior = nil, nil
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		page.Close()
	}()
	return true, w.Bus.Bridge(conns, func(i int) bool { return page.InUse(i) && page.Serving(i) }, wait)
}

// Unbridged lets go of a prior server's descriptors without bridging (a
// server whose frames go through PostgreSQL, or that journals none).
func (w *Worker) Unbridged() {
	if w.priorPage == nil {
		return
	}
	for _, c := range w.prior {
		c.Close()
	}
	w.priorPage.Close()
	w.priorPage, w.prior = nil, nil
}

// Offer returns what a successor is to be handed of this process's server
// when it has no supervisor: its page and its inbox. The caller closes
// them.
func (w *Worker) Offer() (*Prior, error) {
	page, err := dupFile(w.Page.File())
	if err != nil {
		return nil, err
	}
	in, err := w.Bus.out[w.Bus.self].File()
	if err != nil {
		page.Close()
		return nil, err
	}
	return &Prior{Page: page, Inboxes: []*os.File{in}}, nil
}

// Offer returns what a successor is to be handed of the mesh: its page and
// every slot's inbox. The descriptors stay the mesh's.
func (m *Mesh) Offer() *Prior { return &Prior{Page: m.Page.File(), Inboxes: m.outboxes} }
