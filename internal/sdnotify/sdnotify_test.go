package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// listen is a notify socket of the test's own, as the service manager's.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func next(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotify(t *testing.T) {
	for _, name := range []string{filepath.Join(t.TempDir(), "notify"), "@m0-notify-test-" + strconv.Itoa(os.Getpid())} {
		sock := listen(t, name)
		t.Setenv("NOTIFY_SOCKET", name)
		t.Setenv("WATCHDOG_USEC", "3000000")
		t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
		n := FromEnv()
		if n == nil {
			t.Fatalf("%s: no notifier", name)
		}
		for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} {
			if _, ok := os.LookupEnv(k); ok {
				t.Errorf("%s left in the environment", k)
			}
		}
		if got := n.WatchdogEvery(); got != 1500*time.Millisecond {
			t.Errorf("watchdog every %v, want 1.5s", got)
		}
		n.Ready("serving on unix:/x")
		if got, want := next(t, sock), "READY=1\nSTATUS=serving on unix:/x\nMAINPID="+strconv.Itoa(os.Getpid()); got != want {
			t.Errorf("ready: %q, want %q", got, want)
		}
		n.Reloading("reloading")
		if got := next(t, sock); !strings.HasPrefix(got, "RELOADING=1\nSTATUS=reloading\nMONOTONIC_USEC=") {
			t.Errorf("reloading: %q", got)
		}
		n.Watchdog()
		if got := next(t, sock); got != "WATCHDOG=1" {
			t.Errorf("watchdog: %q", got)
		}
		n.Stopping("draining")
		if got := next(t, sock); got != "STOPPING=1\nSTATUS=draining" {
			t.Errorf("stopping: %q", got)
		}
		n.MainPID(42)
		if got := next(t, sock); got != "MAINPID=42" {
			t.Errorf("mainpid: %q", got)
		}
	}
}

func TestNoNotifier(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	var n *Notifier = FromEnv()
	if n != nil {
		t.Fatal("a notifier without NOTIFY_SOCKET")
	}
	n.Ready("x") // a nil notifier sends nothing, and does not panic
	n.Stopping("x")
	if n.WatchdogEvery() != 0 {
		t.Error("a watchdog without a notifier")
	}
	// A watchdog for another process is not this one's.
	name := filepath.Join(t.TempDir(), "notify")
	listen(t, name)
	t.Setenv("NOTIFY_SOCKET", name)
	t.Setenv("WATCHDOG_USEC", "3000000")
	t.Setenv("WATCHDOG_PID", "1")
	if n := FromEnv(); n == nil || n.WatchdogEvery() != 0 {
		t.Errorf("WATCHDOG_PID of another process: %v", n)
	}
}
