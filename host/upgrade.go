package host

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cloudflare/tableflip"
	"github.com/m0serve/m0/internal/bind"
	"github.com/m0serve/m0/internal/proc"
	"github.com/m0serve/m0/prefork"
)

// SIGUSR2 re-executes the process that listens (the supervisor, or a
// single process) as tableflip does: the m0serve on PATH now (a new
// binary, a new CPython), with the same arguments and environment, is
// started with the listeners inherited; it loads the application and
// serves beside this one, and once it is ready (every worker of its own),
// this one drains as on SIGTERM and exits 0. A successor that does not get
// ready (it fails to load, or takes longer than UpgradeTimeout) is
// stopped, and this one serves on.

// UpgradeTimeout bounds how long a successor started by SIGUSR2 may take to
// be ready.
const UpgradeTimeout = time.Minute

// tableflipEnv is the variable by which tableflip tells a successor that it
// has a parent. A successor reads it and takes it out of the environment
// before Python starts (takeOver), so that neither the application nor a
// process it starts sees it.
const tableflipEnv = proc.UpgradeMark

// handOffFile is the name under which the predecessor hands its successor
// a handOff, as a file beside the listeners.
const handOffFile = "m0-handoff"

// The names under which a process hands its successor its server's pages
// and its workers' inboxes (a prefork.Prior), for the successor to number
// from the same counter and its workers to bridge to the old ones while
// they drain. The handOff says how many inboxes.
const (
	priorPageFile = "m0-page"
	priorIDsFile  = "m0-ids"
	priorBusFile  = "m0-bus-" // then the slot
)

// bridges reports whether a server of c bridges to the one it replaces:
// it has a journal to keep (--realtime, --replay-frames above 0), and
// PostgreSQL does not carry its ids and frames (--pg-listen).
func bridges(c *Config) bool { return c.Realtime && c.ReplayFrames > 0 && c.PGListen == "" }

// offerPrior registers p to be handed to a successor.
func (l *listening) offerPrior(p *prefork.Prior) error {
	if err := l.upg.Fds.AddFile(priorPageFile, p.Page); err != nil {
		return err
	}
	if err := l.upg.Fds.AddFile(priorIDsFile, p.IDs); err != nil {
		return err
	}
	for i, f := range p.Inboxes {
		if err := l.upg.Fds.AddFile(priorBusFile+strconv.Itoa(i), f); err != nil {
			return err
		}
	}
	l.inboxes = len(p.Inboxes)
	return l.addHandOff()
}

// handedPrior is the server this process replaces, as it was handed over
// (offerPrior), or nil: read once, before this process offers its own
// under the same names, and taken by whoever calls it first.
var handedPrior = sync.OnceValue(func() *prefork.Prior {
	h := handedOver()
	if h == nil || h.Inboxes == 0 {
		return nil // a predecessor that hands none
	}
	upg, _ := upgrader() // handedOver made it
	p := &prefork.Prior{}
	var err error
	if p.Page, err = upg.Fds.File(priorPageFile); err == nil && p.Page != nil {
		if p.IDs, err = upg.Fds.File(priorIDsFile); err == nil && p.IDs != nil {
			for i := range h.Inboxes {
				f, err := upg.Fds.File(priorBusFile + strconv.Itoa(i))
				if err != nil || f == nil {
					break
				}
				p.Inboxes = append(p.Inboxes, f)
			}
			if len(p.Inboxes) == h.Inboxes {
				return p
			}
		}
	}
	why := "some are missing"
	if err != nil {
		why = err.Error()
	}
	fmt.Fprintf(os.Stderr, "m0serve: the server this one replaces (SIGUSR2) did not hand over its pages and inboxes whole (%s); a client that resumes here from it may be sent m0-gap\n", why)
	p.Close()
	return nil
})

// handOff is what a process started by SIGUSR2 is handed besides its
// listeners: where they listen, in order (the successor serves those,
// whatever its flags say, since the sockets are the ones clients reach
// already), and the service manager's notify socket, which the
// predecessor took out of its environment at its start.
type handOff struct {
	Places   []string      `json:"places"` // bind.Spec strings
	Notify   string        `json:"notify,omitempty"`
	Watchdog time.Duration `json:"watchdog,omitempty"`
	Inboxes  int           `json:"inboxes,omitempty"` // offerPrior's
}

// successorAtStart is whether this process was started by a re-exec:
// tableflip's mark in the environment it was started with.
var successorAtStart = os.Getenv(tableflipEnv) != ""

// takeOver makes a successor's upgrader before Python starts: it reads
// what the predecessor handed over and takes the mark out of the
// environment. Any other process makes its upgrader when it listens.
func takeOver() {
	if successorAtStart {
		upgrader()
	}
}

// upgrader is the process's tableflip.Upgrader, made once by a process
// that listens; workers and the doctor never make one.
var upgrader = sync.OnceValues(func() (*tableflip.Upgrader, error) {
	u, err := tableflip.New(tableflip.Options{UpgradeTimeout: UpgradeTimeout})
	os.Unsetenv(tableflipEnv)
	return u, err
})

// handedOver is what the predecessor handed this process, read once; nil
// for a process no re-exec started.
var handedOver = sync.OnceValue(func() *handOff {
	if !successorAtStart {
		return nil
	}
	upg, err := upgrader()
	if err != nil || !upg.HasParent() {
		return nil
	}
	f, err := upg.Fds.File(handOffFile)
	if err != nil || f == nil {
		return nil
	}
	defer f.Close()
	var h handOff
	if json.NewDecoder(f).Decode(&h) != nil {
		return nil
	}
	return &h
})

// listening is what a process that listens holds: its listeners, and the
// upgrader that can hand them on.
type listening struct {
	ls      []*bind.Listener
	upg     *tableflip.Upgrader
	inboxes int // offerPrior's
}

// listen opens the listeners of c, or takes those the process it replaces
// handed it, and registers them, with a handOff, to be handed on by
// SIGUSR2.
func listen(c *Config) (*listening, error) {
	upg, err := upgrader()
	if err != nil {
		return nil, &startupError{Msg: "cannot prepare for SIGUSR2: " + err.Error()}
	}
	l := &listening{upg: upg}
	if h := handedOver(); h != nil {
		for i, place := range h.Places {
			s, err := bind.Parse(place)
			var ln net.Listener
			if err == nil {
				ln, err = upg.Fds.Listener("m0", strconv.Itoa(i))
			}
			if err != nil || ln == nil {
				closeListeners(l.ls)
				return nil, &startupError{Msg: fmt.Sprintf("the listener of %s was not handed over (SIGUSR2): %v", place, err)}
			}
			l.ls = append(l.ls, bind.Adopt(s, ln))
		}
	} else {
		if l.ls, err = openListeners(c); err != nil {
			return nil, err
		}
		for i, b := range l.ls {
			tl, ok := b.Listener.(tableflip.Listener)
			if !ok {
				continue // none of bind's; SIGUSR2 would not hand it on
			}
			if err := upg.Fds.AddListener("m0", strconv.Itoa(i), tl); err != nil {
				closeListeners(l.ls)
				return nil, &startupError{Msg: "cannot prepare the listener for SIGUSR2: " + err.Error()}
			}
		}
	}
	if err := l.addHandOff(); err != nil {
		closeListeners(l.ls)
		return nil, &startupError{Msg: "cannot prepare for SIGUSR2: " + err.Error()}
	}
	return l, nil
}

// addHandOff registers the handOff a successor is to be given.
func (l *listening) addHandOff() error {
	h := handOff{Notify: notifier().Path(), Watchdog: 2 * notifier().WatchdogEvery(), Inboxes: l.inboxes}
	for _, b := range l.ls {
		h.Places = append(h.Places, b.Spec.String())
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	f, err := proc.AnonFile(handOffFile)
	if err != nil {
		return err
	}
	defer f.Close() // tableflip keeps a copy
	if _, err := f.Write(b); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return l.upg.Fds.AddFile(handOffFile, f)
}

// ready tells the process this one replaces, if any, that it serves.
func (l *listening) ready() {
	if err := l.upg.Ready(); err != nil {
		fmt.Fprintf(os.Stderr, "m0serve: %v\n", err)
	}
}

// stop lets go of the copies of the listeners kept for a successor, as a
// drain begins that hands nothing on: the sockets close with this
// process's own, so that a new connection is refused at once rather than
// queued for no one. A successor on its way is stopped.
func (l *listening) stop() { l.upg.Stop() }

// handOver starts the successor (on sig: SIGUSR2, or SIGHUP in a single
// process) and waits for it to be ready. It reports whether the successor
// took over; the caller then drains. Either way one line on stderr says
// what happened, unless the caller stopped it meanwhile (a SIGTERM).
func (l *listening) handOver(sig string, stderr io.Writer) bool {
	before := children()
	err := l.upg.Upgrade()
	if err != nil {
		if err.Error() != "terminating" {
			fmt.Fprintf(stderr, "m0serve: %s: the new process did not take over (%v); pid %d serves on\n", sig, err, os.Getpid())
		}
		return false
	}
	if pid := successor(before); pid > 0 {
		fmt.Fprintf(stderr, "m0serve: %s: pid %d took over; pid %d drains\n", sig, pid, os.Getpid())
		notifier().MainPID(pid)
	} else { // no /proc to tell it by (macOS)
		fmt.Fprintf(stderr, "m0serve: %s: the new process took over; pid %d drains\n", sig, os.Getpid())
	}
	for _, b := range l.ls {
		b.Keep() // the unix socket files are the successor's now
	}
	return true
}

// children are the pids of this process's children now.
func children() map[int]bool {
	out := map[int]bool{}
	for _, pid := range proc.Children(os.Getpid()) {
		out[pid] = true
	}
	return out
}

// successor is the child started since before by the re-exec, or 0.
func successor(before map[int]bool) int {
	for pid := range children() {
		if !before[pid] && proc.Upgraded(pid) {
			return pid
		}
	}
	return 0
}
