package static

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// file is a file found for a request, open.
type file struct {
	data     []byte   // the whole file, for a small one (fd is then -1)
	fd       int      // the open file
	f        *os.File // fd as an *os.File, once one is needed (to send it with sendfile)
	size     int64
	mod      time.Time
	etag     string
	ctype    string
	encoding string // "br" or "gzip" for a precompressed sibling
	vary     bool   // a precompressed sibling exists
}

// readerAt reads the file at an offset.
func (f *file) readerAt() io.ReaderAt {
	if f.data != nil {
		return bytes.NewReader(f.data)
	}
	return f.file()
}

// closer closes the file.
func (f *file) closer() io.Closer {
	if f.data != nil {
		return io.NopCloser(nil)
	}
	return f.file()
}

// file returns the open file as an *os.File, which then owns it.
func (f *file) file() *os.File {
	if f.f == nil {
		f.f = os.NewFile(uintptr(f.fd), "")
	}
	return f.f
}

func (f *file) close() {
	if f.data != nil {
		return
	}
	if f.f != nil {
		f.f.Close()
	} else {
		unix.Close(f.fd)
	}
}

func (h *Handler) openFile(rel string, br, gz bool) (*file, error) {
	accept := ""
	if br {
		accept = "br"
	}
	if gz {
		accept += ",gzip"
	}
	out := &file{ctype: contentType(rel)}
	var err error
	if out.fd, out.size, out.mod, err = h.regular(rel); err != nil {
		return nil, err
	}
	for _, enc := range [...]struct{ ext, name string }{{".br", "br"}, {".gz", "gzip"}} {
		if !accepts(accept, enc.name) {
			// Siblings are looked for only for a client that may take one:
			// a response it gets is the plain file, which every client takes.
			continue
		}
		fd, size, mod, err := h.regular(rel + enc.ext)
		if err != nil {
			continue
		}
		out.vary = true
		if out.encoding != "" {
			unix.Close(fd)
			continue
		}
		unix.Close(out.fd)
		out.fd, out.size, out.mod, out.encoding = fd, size, mod, enc.name
	}
	suffix := ""
	switch out.encoding {
	case "br":
		suffix = "-br"
	case "gzip":
		suffix = "-gz"
	}
	out.etag = `"` + strconv.FormatInt(out.mod.UnixNano(), 16) + "-" + strconv.FormatInt(out.size, 16) + suffix + `"`
	return out, nil
}

var errNotRegular = errors.New("static: not a regular file")

// regular opens rel beneath the root, and returns it if it is a regular
// file, with its size and modification time.
func (h *Handler) regular(rel string) (fd int, size int64, mod time.Time, err error) {
	if h.rootFd >= 0 {
		if fd, err = openat2(h.rootFd, rel, noSymlinks); err == unix.ELOOP {
			// A symlink on the way: followed if it stays beneath the root
			// and leads to no dotfile.
			if fd, err = openat2(h.rootFd, rel, 0); err == nil && !h.landsVisible(fd) {
				unix.Close(fd)
				err = fs.ErrPermission
			}
		}
		if err != nil {
			return -1, 0, time.Time{}, err
		}
	} else {
		f, err := h.root.Open(rel)
		if err != nil {
			return -1, 0, time.Time{}, err
		}
		fd, err = unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		f.Close()
		if err == nil && !h.landsVisible(fd) {
			unix.Close(fd)
			err = fs.ErrPermission
		}
		if err != nil {
			return -1, 0, time.Time{}, err
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		if err == nil {
			err = errNotRegular
		}
		return -1, 0, time.Time{}, err
	}
	return fd, st.Size, time.Unix(st.Mtim.Sec, st.Mtim.Nsec), nil
}

// landsVisible reports whether the file open at fd is beneath the root by
// a path with no dotfile in it: a symlink may not lead to .env or .git/.
func (h *Handler) landsVisible(fd int) bool {
	target, err := fdPath(fd)
	if err != nil || h.realDir == "" {
		return false
	}
	rel, ok := strings.CutPrefix(target, h.realDir+"/")
	if !ok {
		return false
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == "" || seg[0] == '.' {
			return false
		}
	}
	return true
}
