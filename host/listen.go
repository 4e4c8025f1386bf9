package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/m0serve/m0/internal/bind"
	"github.com/m0serve/m0/internal/sdnotify"
)

// Where a server listens. --bind (repeatable; M0_BIND, comma-separated)
// and --uds name the places; --host and --port name one TCP place. A flag
// beats a variable, so --bind beats M0_HOST and M0_PORT and --host beats
// M0_BIND; both kinds given the same way is refused. Sockets systemd passed
// (socket activation) are the places whatever the flags say, and a place a
// flag names must be one of them.

// placesFrom says which settings name the places: "bind" (--bind and
// --uds), "host" (--host and --port), or "" when both are given the same
// way, which the check "bind" refuses.
func (c *Config) placesFrom() string {
	b := strongest(c.Sources["bind"], c.Sources["uds"])
	h := strongest(c.Sources["host"], c.Sources["port"])
	switch {
	case b == FromDefault:
		return "host"
	case h == FromDefault || b == FromFlag && h == FromEnv:
		return "bind"
	case h == FromFlag && b == FromEnv:
		return "host"
	}
	return ""
}

func strongest(a, b Source) Source {
	for _, s := range []Source{FromFlag, FromEnv} {
		if a == s || b == s {
			return s
		}
	}
	return FromDefault
}

// Places are where the configuration asks to listen, before socket
// activation: --bind's and --uds's, or --host and --port.
func (c *Config) Places() []bind.Spec {
	if c.placesFrom() == "bind" {
		out := append([]bind.Spec{}, c.Binds...)
		if c.UDS != "" {
			out = append(out, bind.Spec{Kind: bind.Unix, Path: c.UDS})
		}
		return out
	}
	return []bind.Spec{{Kind: bind.TCP, Host: c.Host, Port: c.Port}}
}

// placesSource is where the settings that name the places came from:
// FromDefault when none was given.
func (c *Config) placesSource() Source {
	if c.placesFrom() == "bind" {
		return strongest(c.Sources["bind"], c.Sources["uds"])
	}
	return strongest(c.Sources["host"], c.Sources["port"])
}

// activated is what systemd passed this process, read once: the sockets,
// or why they cannot be served.
var activated = sync.OnceValues(bind.Activated)

// notifier is the service manager's (NOTIFY_SOCKET), read once by the
// main process; nil in a worker and without one.
var notifier = sync.OnceValue(func() *sdnotify.Notifier {
	n := sdnotify.FromEnv()
	if h := handedOver(); h != nil && h.Notify != "" { // a successor: its predecessor's
		n = sdnotify.New(h.Notify, h.Watchdog)
	}
	return n
})

// listenChecks are the checks of where to listen, in the order serving
// applies them.
func listenChecks(c *Config) []Check {
	var cs []Check
	add := func(name string, ok bool, detail, fix string) { cs = append(cs, configCheck(name, ok, detail, fix)) }
	from := c.placesFrom()
	add("port", from != "host" || c.Port >= 1 && c.Port <= 65535,
		fmt.Sprintf("port %d is outside 1-65535", c.Port),
		"pass --port or set M0_PORT to a port from 1 to 65535")
	add("bind", from != "",
		fmt.Sprintf("%s and %s both say where to listen", c.spelled("bind", "uds"), c.spelled("host", "port")),
		"use --bind alone (HOST:PORT is one of its forms), or --host and --port alone")
	if from == "" || c.worker {
		return cs // a worker serves what its supervisor opened
	}
	if c.PIDFile != "" {
		pid, live := pidFileOwner(c.PIDFile)
		if handedOver() != nil && pid == os.Getppid() {
			live = false // the process this one replaces (SIGUSR2)
		}
		add("pid", !live, fmt.Sprintf("--pid %s names pid %d, which is running", c.PIDFile, pid),
			"stop that server first, or pass another --pid (a file naming a process that is gone is replaced)")
	}
	if handedOver() != nil {
		return cs // the listeners are the ones the process this one replaces hands it
	}
	sys, err := activated()
	if err != nil {
		add("listen-fds", false, err.Error(),
			"pass only listening stream sockets (ListenStream= in the socket unit), or start m0serve without socket activation")
		return cs
	}
	if len(sys) > 0 {
		var stray []string
		if c.placesSource() == FromFlag { // a variable gives way to the socket unit

			for _, s := range c.Places() {
				if !anyIs(sys, s) {
					stray = append(stray, s.String())
				}
			}
		}
		add("listen-fds", len(stray) == 0,
			fmt.Sprintf("systemd passed %s (socket activation), and %s names %s, which is not one of them",
				urls(sys), c.spelled("bind", "uds", "host", "port"), strings.Join(stray, ", ")),
			"drop the flag (the socket unit says where to listen), or add the place to the socket unit's ListenStream=")
		return cs
	}
	for _, s := range c.Places() {
		switch s.Kind {
		case bind.Unix:
			_, err := bind.Vacant(s.Path)
			if err == nil {
				if _, serr := os.Stat(filepath.Dir(s.Path)); serr != nil {
					err = fmt.Errorf("the directory of unix:%s does not exist", s.Path)
				}
			}
			var held *bind.HeldError
			fix := "name a path in a directory this process may write to"
			if errors.As(err, &held) {
				fix = "stop the server listening there, or bind another path"
			} else if errors.As(err, new(*bind.NotSocketError)) {
				fix = "remove the file yourself, or bind another path; m0serve removes only a socket no server listens on"
			}
			add("unix-socket", err == nil, errString(err), fix)
		case bind.FD:
			err := bind.IsListening(s.FD)
			add("fd", err == nil, fmt.Sprintf("--bind %s: the descriptor %v", s, err),
				"pass a listening socket's descriptor, open in this process (a supervisor's, or systemd's with socket activation)")
		}
	}
	return cs
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// spelled names the settings among names that were given, as they were
// given (--bind, M0_HOST).
func (c *Config) spelled(names ...string) string {
	var out []string
	for _, n := range names {
		switch c.Sources[n] {
		case FromFlag:
			out = append(out, "--"+n)
		case FromEnv:
			for _, s := range settings {
				if s.name == n {
					out = append(out, s.env)
				}
			}
		}
	}
	return strings.Join(out, " and ")
}

func anyIs(ls []*bind.Listener, s bind.Spec) bool {
	for _, l := range ls {
		if l.Is(s) {
			return true
		}
	}
	return false
}

func urls(ls []*bind.Listener) string {
	var out []string
	for _, l := range ls {
		out = append(out, l.URL())
	}
	return strings.Join(out, ", ")
}

// openListeners opens where the configuration listens: the sockets systemd
// passed, when it passed any, or each of its places. A unix socket held by
// a live server is refused (78); another failure to listen is a start-up
// error (1). What was opened before a failure is closed.
func openListeners(c *Config) ([]*bind.Listener, error) {
	sys, err := activated()
	if err != nil {
		return nil, &refusal{Found: err.Error(), Fix: "pass only listening stream sockets, or start m0serve without socket activation"}
	}
	if len(sys) > 0 {
		if c.Backlog > 0 {
			for _, l := range sys {
				if err := bind.SetBacklog(l, c.Backlog); err != nil {
					return nil, &startupError{Msg: fmt.Sprintf("cannot set the listen queue of %s to %d: %v", l.URL(), c.Backlog, err)}
				}
			}
		}
		return sys, nil
	}
	var out []*bind.Listener
	for _, s := range c.Places() {
		l, err := bind.Open(s, bind.Options{Backlog: c.Backlog, Mode: c.UnixMode})
		if err != nil {
			closeListeners(out)
			var held *bind.HeldError
			if errors.As(err, &held) {
				return nil, &refusal{Found: err.Error(), Fix: "stop the server listening there, or bind another path"}
			}
			if errors.As(err, new(*bind.NotSocketError)) {
				return nil, &refusal{Found: err.Error(), Fix: "remove the file yourself, or bind another path"}
			}
			return nil, &startupError{Msg: err.Error()}
		}
		out = append(out, l)
	}
	return out, nil
}

// closeListeners closes ls and removes the unix socket files this process
// made.
func closeListeners(ls []*bind.Listener) {
	for _, l := range ls {
		l.Close()
		l.Release()
	}
}

// pidFileOwner reads a pid file: the pid it names and whether that process
// runs (and is not this one).
func pidFileOwner(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return pid, false
	}
	err = syscall.Kill(pid, 0)
	return pid, err == nil || errors.Is(err, syscall.EPERM)
}

// writePID writes this process's pid to path (through a file beside it,
// renamed over it) and returns the function that removes it, while it
// still names this process.
func writePID(path string) (remove func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	pid := strconv.Itoa(os.Getpid())
	tmp := path + ".tmp" + pid
	if err := os.WriteFile(tmp, []byte(pid+"\n"), 0o644); err != nil {
		return nil, &startupError{Msg: fmt.Sprintf("cannot write the pid file %s: %v", path, errors.Unwrap(err))}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, &startupError{Msg: fmt.Sprintf("cannot write the pid file %s: %v", path, errors.Unwrap(err))}
	}
	return func() {
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == pid {
			os.Remove(path)
		}
	}, nil
}
