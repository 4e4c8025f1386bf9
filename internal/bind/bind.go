// Package bind opens the places a server listens on: a TCP address, a
// unix socket (its mode set, a stale file left by a dead server replaced,
// one a live server holds refused, the file removed when the server is
// done with it), a descriptor the server inherited (fd://N), or the
// sockets systemd passed by socket activation; each with the listen queue
// asked for.
package bind

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Kind is what a Spec names.
type Kind int

// The kinds of place.
const (
	TCP  Kind = iota // HOST:PORT
	Unix             // unix:PATH
	FD               // fd://N, an inherited descriptor
)

// DefaultPort is the port of a TCP bind that names none, as gunicorn's.
const DefaultPort = 8000

// Spec is one place to listen, as --bind spells it.
type Spec struct {
	Kind Kind
	Host string // TCP: an IP address or localhost, without brackets
	Port int    // TCP
	Path string // Unix
	FD   int    // FD
}

// Parse reads one --bind value: HOST:PORT, [IPV6]:PORT, HOST (port
// DefaultPort), unix:PATH (or unix://PATH), or fd://N.
func Parse(s string) (Spec, error) {
	switch {
	case strings.HasPrefix(s, "unix:"):
		p := strings.TrimPrefix(strings.TrimPrefix(s, "unix:"), "//")
		if p == "" || strings.ContainsRune(p, 0) {
			return Spec{}, fmt.Errorf("want unix:PATH, not %q", s)
		}
		return Spec{Kind: Unix, Path: p}, nil
	case strings.HasPrefix(s, "fd://"):
		n, err := strconv.Atoi(s[len("fd://"):])
		if err != nil || n < 0 {
			return Spec{}, fmt.Errorf("want fd://N with N a descriptor number, not %q", s)
		}
		return Spec{Kind: FD, FD: n}, nil
	}
	host, port := s, ""
	if net.ParseIP(s) != nil || strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") && net.ParseIP(s[1:len(s)-1]) != nil {
		// An address alone, IPv6 ones included ("::"): the default port.
	} else if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "[") {
		return Spec{}, fmt.Errorf("an IPv6 address with a port is written [ADDR]:PORT, not %q", s)
	}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if host != "localhost" && net.ParseIP(host) == nil {
		return Spec{}, fmt.Errorf("want HOST:PORT (HOST an IP address or localhost), unix:PATH or fd://N, not %q", s)
	}
	n := DefaultPort
	if port != "" {
		var err error
		if n, err = strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return Spec{}, fmt.Errorf("not a port number in %q", s)
		}
	}
	return Spec{Kind: TCP, Host: host, Port: n}, nil
}

// String is the spec as --bind spells it.
func (s Spec) String() string {
	switch s.Kind {
	case Unix:
		return "unix:" + s.Path
	case FD:
		return "fd://" + strconv.Itoa(s.FD)
	}
	return net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
}

// Options say how a place is opened.
type Options struct {
	// Backlog is the listen queue; 0 leaves the kernel's (somaxconn) on a
	// socket opened here, and an inherited socket's as it is.
	Backlog int
	// Mode is a unix socket's file mode; 0 means DefaultMode.
	Mode os.FileMode
}

// DefaultMode is a unix socket's mode unless asked otherwise: any local
// user may connect, as uvicorn's --uds does, so that a proxy running as
// another user (nginx as www-data) reaches it. The directory it is in
// decides who may in the end.
const DefaultMode os.FileMode = 0o666

// Listener is an open place.
type Listener struct {
	net.Listener
	Spec Spec
	// Name is the name systemd gave an activated socket (its unit's
	// FileDescriptorName=), or "".
	Name string
	// made is the unix socket file this process made (its inode and
	// change time: a file made later may reuse the inode), which Release
	// removes only while the path is still that file.
	made *fileID
}

// HeldError is a unix socket path another server is listening on.
type HeldError struct{ Path string }

func (e *HeldError) Error() string {
	return fmt.Sprintf("unix:%s is held by a live server (it accepts connections)", e.Path)
}

// NotSocketError is a unix bind whose path is a file of another kind,
// which is not removed.
type NotSocketError struct{ Path string }

func (e *NotSocketError) Error() string {
	return fmt.Sprintf("unix:%s exists and is not a socket", e.Path)
}

// Open opens the place s names.
func Open(s Spec, o Options) (*Listener, error) {
	var ln net.Listener
	var err error
	l := &Listener{Spec: s}
	switch s.Kind {
	case TCP:
		ln, err = net.Listen(network(s.Host), s.String())
		if err != nil {
			return nil, fmt.Errorf("cannot listen on %s: %w", s, unwrap(err))
		}
	case Unix:
		stale, err := Vacant(s.Path)
		if err != nil {
			return nil, err
		}
		if stale {
			if err := os.Remove(s.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("cannot remove the stale unix:%s: %w", s.Path, unwrap(err))
			}
		}
		ln, err = net.Listen("unix", s.Path)
		if err != nil {
			return nil, fmt.Errorf("cannot listen on %s: %w", s, unwrap(err))
		}
		ul := ln.(*net.UnixListener)
		ul.SetUnlinkOnClose(false) // Release removes it, once the server is done
		mode := o.Mode
		if mode == 0 {
			mode = DefaultMode
		}
		err = os.Chmod(s.Path, mode)
		l.made = idOf(s.Path) // after the chmod, which changes its ctime
		if err != nil {
			ln.Close()
			l.Release()
			return nil, fmt.Errorf("cannot set the mode of %s: %w", s, unwrap(err))
		}
	case FD:
		ln, err = Inherited(s.FD, "")
		if err != nil {
			return nil, err
		}
	}
	l.Listener = ln
	if o.Backlog > 0 {
		if err := SetBacklog(ln, o.Backlog); err != nil {
			ln.Close()
			l.Release()
			return nil, fmt.Errorf("cannot set the listen queue of %s to %d: %w", s, o.Backlog, err)
		}
	}
	return l, nil
}

// network is the network a TCP host listens on: an IPv4 address (or
// localhost) on IPv4 alone, :: on IPv6 and IPv4 at once, any other IPv6
// address on IPv6.
func network(host string) string {
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return "tcp"
	case ip.To4() != nil:
		return "tcp4"
	case ip.IsUnspecified():
		return "tcp"
	}
	return "tcp6"
}

// unwrap is the cause of a net.OpError, without the operation's words.
func unwrap(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			return sys.Err
		}
		return op.Err
	}
	return err
}

// Vacant reports whether a unix socket may be made at path: nothing is
// there, or a socket no server listens on (left by one that died: stale,
// which Open replaces). A socket a live server accepts on is a
// *HeldError, a file of another kind a *NotSocketError. It changes
// nothing.
func Vacant(path string) (stale bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot look at unix:%s: %w", path, unwrap(err))
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return false, &NotSocketError{Path: path}
	}
	if Live(path) {
		return false, &HeldError{Path: path}
	}
	return true, nil
}

// liveWait bounds Live's connection attempt.
const liveWait = time.Second

// Live reports whether a server accepts connections on the unix socket at
// path.
func Live(path string) bool {
	c, err := net.DialTimeout("unix", path, liveWait)
	if err != nil {
		// ECONNREFUSED: nobody listens. A full queue (EAGAIN) is a live
		// server all the same.
		return errors.Is(err, syscall.EAGAIN)
	}
	c.Close()
	return true
}

// Release removes the unix socket file this process made, if the path is
// still that file (another server may have bound it since); for any other
// place it does nothing. Call it once the listener is closed everywhere
// it serves.
func (l *Listener) Release() {
	if l.Spec.Kind != Unix || l.made == nil {
		return
	}
	if id := idOf(l.Spec.Path); id != nil && *id == *l.made {
		os.Remove(l.Spec.Path)
	}
	l.made = nil
}

// Adopt is a listener handed over by the process this one replaces, as
// s names it: a unix socket's file is this process's to remove from now
// on, while it is still the one ln listens on.
func Adopt(s Spec, ln net.Listener) *Listener {
	l := &Listener{Listener: ln, Spec: s}
	if s.Kind == Unix {
		l.made = idOf(s.Path)
	}
	return l
}

// Keep gives up the removal of the socket file: the file is another
// process's now (the listener was handed on).
func (l *Listener) Keep() { l.made = nil }

// fileID tells one file from another made at the same path later.
type fileID struct {
	dev, ino uint64
	ctime    unix.Timespec
}

// idOf is the file at path's, or nil.
func idOf(path string) *fileID {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return nil
	}
	return &fileID{dev: uint64(st.Dev), ino: st.Ino, ctime: st.Ctim}
}

// URL is the place as a ready line names it: http://HOST:PORT with the
// host as it was asked for and the port it listens on, or unix:PATH.
func (l *Listener) URL() string { return URLOf(l.Addr(), l.Spec) }

// URLOf names a listening address as a ready line does: http://IP:PORT, or
// unix:PATH; a TCP address one of specs names (by its port, and its host
// or an unspecified one) with that spec's host (localhost, 0.0.0.0), as
// it was asked for.
func URLOf(a net.Addr, specs ...Spec) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		for _, s := range specs {
			if s.Kind == TCP && (s.Port == a.Port || s.Port == 0) && hostIs(s.Host, a.IP) {
				return "http://" + net.JoinHostPort(s.Host, strconv.Itoa(a.Port))
			}
		}
		ip := a.IP
		if ip4 := ip.To4(); ip4 != nil {
			ip = ip4
		}
		return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(a.Port))
	case *net.UnixAddr:
		return "unix:" + a.Name
	}
	return a.String()
}

// hostIs reports whether a TCP spec's host is ip: the same address,
// localhost for a loopback one, or an unspecified one (0.0.0.0, ::) for
// an unspecified one.
func hostIs(host string, ip net.IP) bool {
	if host == "localhost" {
		return ip.IsLoopback()
	}
	h := net.ParseIP(host)
	return h != nil && (h.Equal(ip) || h.IsUnspecified() && ip.IsUnspecified())
}

// File returns a duplicate of the listener's descriptor, for a process
// that inherits it; the listener stays open.
func (l *Listener) File() (*os.File, error) {
	f, ok := l.Listener.(interface{ File() (*os.File, error) })
	if !ok {
		return nil, fmt.Errorf("cannot pass %s on", l.Spec)
	}
	return f.File()
}

// SetBacklog sets ln's listen queue to n: listen(2) again on a listening
// socket changes only its queue.
func SetBacklog(ln net.Listener, n int) error {
	if l, ok := ln.(*Listener); ok {
		ln = l.Listener
	}
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return errors.ErrUnsupported
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = unix.Listen(int(fd), n) }); err != nil {
		return err
	}
	return lerr
}

// Inherited is the listening socket at descriptor fd, which the process
// inherited; the descriptor is taken (closed, its listener a duplicate).
// name is what systemd named it, for messages.
func Inherited(fd int, name string) (net.Listener, error) {
	what := fmt.Sprintf("fd://%d", fd)
	if name != "" {
		what += " (" + name + ")"
	}
	if err := IsListening(fd); err != nil {
		return nil, fmt.Errorf("%s %w", what, err)
	}
	f := os.NewFile(uintptr(fd), what)
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s cannot be served: %w", what, err)
	}
	return ln, nil
}

// IsListening says, as an error, why descriptor fd is not a stream socket
// listening for connections; nil when it is.
func IsListening(fd int) error {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		if errors.Is(err, unix.EBADF) {
			return errors.New("is not an open descriptor")
		}
		return errors.New("is not a socket")
	}
	if typ != unix.SOCK_STREAM {
		return errors.New("is not a stream socket")
	}
	if on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || on == 0 {
		return errors.New("is a socket that is not listening")
	}
	return nil
}
