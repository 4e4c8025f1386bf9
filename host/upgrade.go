package host

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cloudflare/tableflip"
	"github.com/m0serve/m0/internal/bind"
	"github.com/m0serve/m0/internal/proc"
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

// upgradeEnv carries, to the successor, the places of the listeners it is
// handed, in order (JSON, bind.Spec strings): it serves those, whatever its
// flags say, since the sockets are the ones clients reach already.
const upgradeEnv = "M0_UPGRADE_LISTENERS"

// tableflipEnv is the variable by which tableflip tells a successor that it
// has a parent; it is taken out of the environment once read, so that what
// the successor starts (its workers, the application's subprocesses) does
// not see it.
const tableflipEnv = proc.UpgradeMark

// handedOver are the places a process started by SIGUSR2 was handed, read
// once (and taken out of the environment); nil for any other process.
var handedOver = sync.OnceValue(func() []bind.Spec {
	v, ok := os.LookupEnv(upgradeEnv)
	if !ok {
		return nil
	}
	os.Unsetenv(upgradeEnv)
	var names []string
	if json.Unmarshal([]byte(v), &names) != nil {
		return nil
	}
	specs := make([]bind.Spec, 0, len(names))
	for _, n := range names {
		s, err := bind.Parse(n)
		if err != nil {
			return nil
		}
		specs = append(specs, s)
	}
	return specs
})

// upgrader is the process's tableflip.Upgrader, made by the first process
// that listens; workers and the doctor never make one.
var upgrader = sync.OnceValues(func() (*tableflip.Upgrader, error) {
	u, err := tableflip.New(tableflip.Options{UpgradeTimeout: UpgradeTimeout})
	os.Unsetenv(tableflipEnv)
	return u, err
})

// listening is what a process that listens holds: its listeners, and the
// upgrader that can hand them on.
type listening struct {
	ls  []*bind.Listener
	upg *tableflip.Upgrader
}

// listen opens the listeners of c, or takes those the process it replaces
// handed it, and registers them to be handed on by SIGUSR2.
func listen(c *Config) (*listening, error) {
	upg, err := upgrader()
	if err != nil {
		return nil, &startupError{Msg: "cannot prepare for SIGUSR2: " + err.Error()}
	}
	l := &listening{upg: upg}
	if specs := handedOver(); upg.HasParent() && specs != nil {
		for i, s := range specs {
			ln, err := upg.Fds.Listener("m0", strconv.Itoa(i))
			if err != nil || ln == nil {
				closeListeners(l.ls)
				return nil, &startupError{Msg: fmt.Sprintf("the listener of %s was not handed over (SIGUSR2): %v", s, err)}
			}
			l.ls = append(l.ls, bind.Adopt(s, ln))
		}
		return l, nil
	}
	if l.ls, err = openListeners(c); err != nil {
		return nil, err
	}
	for i, b := range l.ls {
		tl, ok := b.Listener.(tableflip.Listener)
		if !ok {
			continue // not one that can be handed on; SIGUSR2 says so
		}
		if err := upg.Fds.AddListener("m0", strconv.Itoa(i), tl); err != nil {
			closeListeners(l.ls)
			return nil, &startupError{Msg: "cannot prepare the listener for SIGUSR2: " + err.Error()}
		}
	}
	return l, nil
}

// ready tells the process this one replaces, if any, that it serves.
func (l *listening) ready() {
	if err := l.upg.Ready(); err != nil {
		fmt.Fprintf(os.Stderr, "m0serve: %v\n", err)
	}
}

// handOver starts the successor (on sig: SIGUSR2, or SIGHUP in a single
// process) and waits for it to be ready. It reports whether the successor
// took over; the caller then drains. Either way one line on stderr says
// what happened.
func (l *listening) handOver(sig string, stderr io.Writer) bool {
	names := make([]string, len(l.ls))
	for i, b := range l.ls {
		names[i] = b.Spec.String()
	}
	b, _ := json.Marshal(names)
	env := append([]string{upgradeEnv + "=" + string(b)}, notifier().Env()...)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	before := children()
	err := l.upg.Upgrade()
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		os.Unsetenv(k)
	}
	if err != nil {
		fmt.Fprintf(stderr, "m0serve: %s: the new process did not take over (%v); pid %d serves on\n", sig, err, os.Getpid())
		return false
	}
	pid := successor(before)
	fmt.Fprintf(stderr, "m0serve: %s: pid %d took over; pid %d drains\n", sig, pid, os.Getpid())
	if pid > 0 {
		notifier().MainPID(pid)
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
