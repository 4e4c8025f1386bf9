package bind

import (
	"fmt"
	"net"
	"path/filepath"

	"github.com/coreos/go-systemd/v22/activation"
)

// Activated returns the sockets systemd passed this process by socket
// activation (LISTEN_PID naming this process, LISTEN_FDS, LISTEN_FDNAMES),
// in order, and takes the variables out of the environment, so that
// neither the application nor a process it starts takes the sockets for
// its own. None is nil; a passed descriptor that is not a listening
// stream socket is an error naming it.
func Activated() ([]*Listener, error) {
	files := activation.Files(true)
	var out []*Listener
	for i, f := range files {
		fd := 3 + i
		ln, err := Inherited(fd, f.Name())
		if err != nil {
			for _, l := range out {
				l.Close()
			}
			for _, g := range files[i+1:] {
				g.Close()
			}
			return nil, fmt.Errorf("systemd passed %d sockets (LISTEN_FDS), and %w", len(files), err)
		}
		name := f.Name()
		if name == fmt.Sprintf("LISTEN_FD_%d", fd) {
			name = "" // unnamed
		}
		out = append(out, &Listener{Listener: ln, Spec: Spec{Kind: FD, FD: fd}, Name: name})
	}
	return out, nil
}

// Is reports whether the listener listens where s names: the same unix
// path, or the same TCP address and port (localhost is 127.0.0.1), or the
// same descriptor.
func (l *Listener) Is(s Spec) bool {
	switch s.Kind {
	case FD:
		return l.Spec.Kind == FD && l.Spec.FD == s.FD
	case Unix:
		a, ok := l.Addr().(*net.UnixAddr)
		return ok && filepath.Clean(a.Name) == filepath.Clean(s.Path)
	}
	a, ok := l.Addr().(*net.TCPAddr)
	return ok && a.Port == s.Port && hostIs(s.Host, a.IP)
}
