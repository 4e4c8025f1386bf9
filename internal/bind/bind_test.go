//go:build linux

package bind

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Spec{
		"127.0.0.1:9000":       {Kind: TCP, Host: "127.0.0.1", Port: 9000},
		"0.0.0.0":              {Kind: TCP, Host: "0.0.0.0", Port: DefaultPort},
		"[::1]:81":             {Kind: TCP, Host: "::1", Port: 81},
		"::":                   {Kind: TCP, Host: "::", Port: DefaultPort},
		"localhost:0":          {Kind: TCP, Host: "localhost", Port: 0},
		"unix:/run/m0.sock":    {Kind: Unix, Path: "/run/m0.sock"},
		"unix:///run/m0.sock":  {Kind: Unix, Path: "/run/m0.sock"},
		"unix:relative/m.sock": {Kind: Unix, Path: "relative/m.sock"},
		"fd://3":               {Kind: FD, FD: 3},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "example.com:80", "1.2.3.4:70000", "1.2.3.4:x", "unix:", "fd://", "fd://-1", "fd://x", "[::1:80"} {
		if s, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", in, s)
		}
	}
	// ::1:80 is an IPv6 address, not ::1 and a port.
	if s, err := Parse("::1:80"); err != nil || s.Host != "::1:80" || s.Port != DefaultPort {
		t.Errorf("Parse(::1:80) = %+v, %v", s, err)
	}
	for _, s := range []string{"127.0.0.1:9000", "[::1]:81", "unix:/run/m0.sock", "fd://3"} {
		if sp, _ := Parse(s); sp.String() != s {
			t.Errorf("Parse(%q).String() = %q", s, sp.String())
		}
	}
}

func TestOpenTCPWithBacklog(t *testing.T) {
	l, err := Open(Spec{Kind: TCP, Host: "127.0.0.1", Port: 0}, Options{Backlog: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if got, want := l.URL(), "http://127.0.0.1:"+strconv.Itoa(port); got != want {
		t.Errorf("URL %q, want %q", got, want)
	}
	if q := backlogOf(t, l); q != 7 {
		t.Errorf("listen queue %d, want 7", q)
	}
	// A second server on the same port: the error names the place.
	_, err = Open(Spec{Kind: TCP, Host: "127.0.0.1", Port: port}, Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot listen on 127.0.0.1:"+strconv.Itoa(port)) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("the port in use: %v", err)
	}
}

// backlogOf is a listening socket's queue limit: on Linux, TCP_INFO's
// tcpi_sacked of a socket in LISTEN (ss shows it as Send-Q).
func backlogOf(t *testing.T, ln net.Listener) int {
	t.Helper()
	if l, ok := ln.(*Listener); ok {
		ln = l.Listener
	}
	rc, err := ln.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var ierr error
	rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if ierr != nil {
		t.Fatal(ierr)
	}
	return int(info.Sacked)
}

func TestOpenUnix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m0.sock")
	s := Spec{Kind: Unix, Path: path}
	l, err := Open(s, Options{Mode: 0o660})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("the socket file: %v, %v", fi, err)
	}
	if l.URL() != "unix:"+path || !l.Is(s) {
		t.Errorf("URL %q, Is %v", l.URL(), l.Is(s))
	}
	// Held by a live server: refused, and the file is left alone.
	if _, err := Open(s, Options{}); !errors.As(err, new(*HeldError)) {
		t.Errorf("a path a live server holds: %v", err)
	}
	if stale, err := Vacant(path); stale || !errors.As(err, new(*HeldError)) {
		t.Errorf("Vacant of a held path: %v, %v", stale, err)
	}
	// Closed, the file stays (the server removes it when done: Release).
	l.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file went with the close: %v", err)
	}
	if stale, err := Vacant(path); !stale || err != nil {
		t.Errorf("Vacant of a dead server's socket: %v, %v", stale, err)
	}
	// A dead server's socket is replaced, with the default mode.
	l2, err := Open(s, Options{})
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != DefaultMode {
		t.Errorf("mode %v, want %v", fi.Mode().Perm(), DefaultMode)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	l2.Close()
	l2.Release()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Release left the file: %v", err)
	}
	// Release removes only the file it made: another server's is kept.
	l3, _ := Open(s, Options{})
	l3.Close()
	os.Remove(path)
	other, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	l3.Release()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Release removed another server's socket: %v", err)
	}
	// A file of another kind is never removed.
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("x"), 0o644)
	if _, err := Open(Spec{Kind: Unix, Path: plain}, Options{}); !errors.As(err, new(*NotSocketError)) {
		t.Errorf("a plain file: %v", err)
	}
	if b, _ := os.ReadFile(plain); string(b) != "x" {
		t.Error("the plain file was touched")
	}
	if _, err := Open(Spec{Kind: Unix, Path: filepath.Join(dir, "no", "such.sock")}, Options{}); err == nil {
		t.Error("a path in a directory that does not exist opened")
	}
}

func TestInherited(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	fd := int(f.Fd())
	l, err := Open(Spec{Kind: FD, FD: fd}, Options{Backlog: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if q := backlogOf(t, l); q != 5 {
		t.Errorf("backlog %d, want 5", q)
	}
	if !strings.HasPrefix(l.URL(), "http://127.0.0.1:") || !l.Is(Spec{Kind: FD, FD: fd}) {
		t.Errorf("URL %q", l.URL())
	}
	// The descriptor was taken: it is closed.
	if err := IsListening(fd); err == nil || !strings.Contains(err.Error(), "not an open descriptor") {
		t.Errorf("the taken descriptor: %v", err)
	}
	// What is not a listening stream socket says what it is.
	p, q, _ := os.Pipe()
	defer p.Close()
	defer q.Close()
	if err := IsListening(int(p.Fd())); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("a pipe: %v", err)
	}
	u, _ := net.ListenPacket("udp", "127.0.0.1:0")
	defer u.Close()
	uf, _ := u.(*net.UDPConn).File()
	defer uf.Close()
	if err := IsListening(int(uf.Fd())); err == nil || !strings.Contains(err.Error(), "not a stream socket") {
		t.Errorf("a datagram socket: %v", err)
	}
	cs, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	defer unix.Close(cs)
	if err := IsListening(cs); err == nil || !strings.Contains(err.Error(), "not listening") {
		t.Errorf("a stream socket not listening: %v", err)
	}
}

func TestURLOf(t *testing.T) {
	a := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8001}
	for _, c := range []struct {
		specs []Spec
		want  string
	}{
		{nil, "http://127.0.0.1:8001"},
		{[]Spec{{Kind: TCP, Host: "localhost", Port: 8001}}, "http://localhost:8001"},
		{[]Spec{{Kind: TCP, Host: "localhost", Port: 0}}, "http://localhost:8001"},
		{[]Spec{{Kind: TCP, Host: "::", Port: 9}}, "http://127.0.0.1:8001"},
		{[]Spec{{Kind: TCP, Host: "::1", Port: 0}, {Kind: TCP, Host: "127.0.0.1", Port: 0}}, "http://127.0.0.1:8001"},
		{[]Spec{{Kind: Unix, Path: "/x"}, {Kind: TCP, Host: "127.0.0.1", Port: 8001}}, "http://127.0.0.1:8001"},
	} {
		if got := URLOf(a, c.specs...); got != c.want {
			t.Errorf("URLOf(%v, %v) = %q, want %q", a, c.specs, got, c.want)
		}
	}
	if got := URLOf(&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}); got != "unix:/run/x.sock" {
		t.Errorf("unix: %q", got)
	}
}

func TestIs(t *testing.T) {
	l, err := Open(Spec{Kind: TCP, Host: "127.0.0.1", Port: 0}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	for s, want := range map[Spec]bool{
		{Kind: TCP, Host: "127.0.0.1", Port: port}: true,
		{Kind: TCP, Host: "localhost", Port: port}: true,
		{Kind: TCP, Host: "127.0.0.2", Port: port}: false,
		{Kind: TCP, Host: "127.0.0.1", Port: 1}:    false,
		{Kind: Unix, Path: "/x"}:                   false,
	} {
		if l.Is(s) != want {
			t.Errorf("Is(%v) = %v", s, !want)
		}
	}
}
