// Package sdnotify tells a service manager how the server is doing, as
// sd_notify(3) does: READY=1 once it serves, RELOADING=1 and STOPPING=1
// as it changes, STATUS= in words, MAINPID= when another process takes
// over, and WATCHDOG=1 at half the interval WATCHDOG_USEC asks for.
package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Notifier sends the service manager its messages. A nil *Notifier (no
// NOTIFY_SOCKET) sends nothing, and every method may be called on it.
type Notifier struct {
	addr     *net.UnixAddr
	watchdog time.Duration // WATCHDOG_USEC, when it is this process's
	mu       sync.Mutex
	failed   bool // a send failed; said once
}

// FromEnv reads NOTIFY_SOCKET (a path, or @NAME in the abstract
// namespace), WATCHDOG_USEC and WATCHDOG_PID, and takes them out of the
// environment: the service manager takes messages from the main process,
// and neither the application nor a worker is it. Nil without
// NOTIFY_SOCKET.
func FromEnv() *Notifier {
	path := os.Getenv("NOTIFY_SOCKET")
	usec, wpid := os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID")
	for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} {
		os.Unsetenv(k)
	}
	if path == "" || !(strings.HasPrefix(path, "/") || strings.HasPrefix(path, "@")) {
		return nil // unset, or a kind of socket (vsock:) this does not speak
	}
	n := &Notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}}
	if us, err := strconv.ParseInt(usec, 10, 64); err == nil && us > 0 {
		if pid, err := strconv.Atoi(wpid); wpid == "" || err == nil && pid == os.Getpid() {
			n.watchdog = time.Duration(us) * time.Microsecond
		}
	}
	return n
}

// New is a notifier of the socket at path, asked for WATCHDOG=1 every
// watchdog (0: never): what a process that takes another's place is handed
// of its notifier (Path, WatchdogEvery). Nil for an empty path.
func New(path string, watchdog time.Duration) *Notifier {
	if path == "" {
		return nil
	}
	return &Notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}, watchdog: watchdog}
}

// Path is the notify socket's path, "" for none.
func (n *Notifier) Path() string {
	if n == nil {
		return ""
	}
	return n.addr.Name
}

// Send sends one message of the lines given ("READY=1", "STATUS=...").
func (n *Notifier) Send(lines ...string) error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err == nil {
		_, err = c.Write([]byte(strings.Join(lines, "\n")))
		c.Close()
	}
	if err != nil && !n.failed {
		n.failed = true
		fmt.Fprintf(os.Stderr, "m0serve: cannot notify the service manager at NOTIFY_SOCKET=%s: %v\n", n.addr.Name, err)
	}
	return err
}

// Ready says the server serves; status says where, in words.
func (n *Notifier) Ready(status string) {
	n.Send("READY=1", "STATUS="+status, "MAINPID="+strconv.Itoa(os.Getpid()))
}

// Status says, in words, what the server is doing.
func (n *Notifier) Status(status string) { n.Send("STATUS=" + status) }

// Reloading says the server reloads; Ready follows once it serves again.
func (n *Notifier) Reloading(status string) {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	n.Send("RELOADING=1", "STATUS="+status, "MONOTONIC_USEC="+strconv.FormatInt(ts.Nano()/1000, 10))
}

// Stopping says the server drains and will exit.
func (n *Notifier) Stopping(status string) { n.Send("STOPPING=1", "STATUS="+status) }

// MainPID says another process is the service's main one now.
func (n *Notifier) MainPID(pid int) { n.Send("MAINPID=" + strconv.Itoa(pid)) }

// WatchdogEvery is how often to send WATCHDOG=1 (half the interval the
// service manager asked for), or 0 when it asked for none.
func (n *Notifier) WatchdogEvery() time.Duration {
	if n == nil {
		return 0
	}
	return n.watchdog / 2
}

// Watchdog tells the service manager the server is alive.
func (n *Notifier) Watchdog() { n.Send("WATCHDOG=1") }
