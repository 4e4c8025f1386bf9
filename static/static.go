// Package static serves a directory's files as an http.Handler in front of
// another handler: a request for a file that is there gets it (sendfile,
// ETag, Last-Modified, ranges, precompressed siblings), and anything else
// falls through to the handler behind, the application.
//
// Nothing outside the directory is ever served: the path is checked
// segment by segment (no "..", no dotfiles, no NUL), and the file is opened
// through an os.Root, which the kernel keeps beneath the directory, symlinks
// included. A symlink inside the directory that stays inside it is
// followed.
package static

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/m0serve/m0/middleware"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"
)

// Options configures a static handler. A nil *Options is valid.
type Options struct {
	// Prefix is the URL path the directory is served under ("/static/");
	// a request outside it goes to Next untouched. "" or "/" is the root.
	Prefix string

	// CacheControl, if set, is the Cache-Control header of successes (200,
	// 206 and 304).
	CacheControl string

	// Headers are added to every response of the handler, errors included.
	// One named Content-Security-Policy replaces the policy SVGs carry.
	Headers []Header

	// Next serves what the directory does not have. Nil means a 404.
	Next http.Handler
}

// Header is one response header.
type Header struct{ Name, Value string }

// ParseHeader parses "Name: value": a name of token characters, and a
// value without control bytes but tabs (RFC 9110 5.1, 5.5).
func ParseHeader(s string) (Header, error) {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || strings.ContainsFunc(name, notToken) ||
		strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return Header{}, fmt.Errorf("want 'Name: value', not %q", s)
	}
	return Header{http.CanonicalHeaderKey(name), value}, nil
}

// notToken reports whether r may not be in a header name.
func notToken(r rune) bool {
	return r <= ' ' || r >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r)
}

// SVGPolicy is the Content-Security-Policy of an SVG: opened directly or
// framed it is a sandboxed document with no script and a unique origin,
// while <img>, CSS backgrounds and <use> still render it.
const SVGPolicy = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; sandbox"

// Handler serves a directory; see New.
type Handler struct {
	dir       string
	root      *os.Root // where openat2 is missing
	realDir   string   // dir with its symlinks resolved
	rootFd    int      // the directory, for openat2 (-1 without it)
	prefix    string
	cache     string
	headers   []Header
	repeat    []bool // headers[i]'s name came before: it is added, not set
	svgPolicy bool   // no Content-Security-Policy among headers
	next      http.Handler
	fastNext  func(*fasthttp.RequestCtx)

	small      sync.Map // cacheKey -> *smallFile
	smallCount atomic.Int64
	gate       wire.Gate // the requests opening a file, for Shutdown
}

// New returns a handler that serves dir under opts.Prefix in front of
// opts.Next. dir must be a directory.
func New(dir string, opts *Options) (*Handler, error) {
	if opts == nil {
		opts = &Options{}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	rootFd := -1
	if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		// openat2 (Linux 5.6) keeps every lookup beneath the directory in the
		// kernel, in one system call; os.Root serves where it is missing.
		if probe, err := openat2(fd, ".", 0); err == nil {
			unix.Close(probe)
			rootFd = fd
		} else {
			unix.Close(fd)
		}
	}
	prefix := "/" + strings.Trim(opts.Prefix, "/")
	if prefix != "/" {
		prefix += "/"
	}
	realDir, _ := filepath.EvalSymlinks(dir)
	if realDir != "" {
		realDir, _ = filepath.Abs(realDir)
	}
	h := &Handler{dir: dir, root: root, rootFd: rootFd, realDir: realDir, prefix: prefix, cache: opts.CacheControl, headers: opts.Headers,
		svgPolicy: true, next: opts.Next}
	seen := map[string]bool{}
	for _, hd := range opts.Headers {
		if strings.EqualFold(hd.Name, "Content-Security-Policy") {
			h.svgPolicy = false
		}
		name := http.CanonicalHeaderKey(hd.Name)
		h.repeat = append(h.repeat, seen[name])
		seen[name] = true
	}
	if f, ok := opts.Next.(middleware.FastHandler); ok {
		h.fastNext = f.ServeFastHTTP
	}
	return h, nil
}

// ErrClosed is returned by a second Shutdown; errors.Is finds
// http.ErrServerClosed in it, as in every m0 handler's.
var ErrClosed = wire.Closed("static")

// errShut is what opening a file returns once the handler is shut down.
var errShut = errors.New("static: handler shut down")

// Shutdown stops the handler: files are no longer opened (a request for
// one is answered 503), and once the requests opening one have done so, or
// ctx has ended, the directory is let go of. Bodies already being sent
// finish. A second Shutdown returns ErrClosed.
func (h *Handler) Shutdown(ctx context.Context) error {
	first, err := h.gate.Close(ctx)
	if !first {
		return ErrClosed
	}
	if err != nil {
		return fmt.Errorf("static: requests still opening files: %w", err)
	}
	if h.rootFd >= 0 {
		unix.Close(h.rootFd)
	}
	return h.root.Close()
}

// openGated opens a file as open does, while the handler serves.
func (h *Handler) openGated(rel, accept string) (*file, error) {
	if !h.gate.Enter() {
		return nil, errShut
	}
	defer h.gate.Leave()
	return h.open(rel, accept)
}

// refusal is why a path is not looked up.
type refusal int

const (
	lookUp    refusal = iota // a path to look up
	notMine                  // outside the prefix: the next handler's
	forbidden                // a path that may not be served (404, never the next handler)
	malformed                // 400
)

// rel returns the path below the root that the request path names, or why
// it names none. p is the decoded path; raw, the target as sent.
func (h *Handler) rel(p, raw string) (string, refusal) {
	if !strings.HasPrefix(p, h.prefix) {
		if p+"/" == h.prefix {
			return "", forbidden // the prefix itself: no listing
		}
		return "", notMine
	}
	if strings.ContainsRune(p, 0) || strings.Contains(raw, "%00") {
		return "", malformed
	}
	rest := p[len(h.prefix):]
	if rest == "" {
		return "", forbidden
	}
	for tail := rest; ; {
		seg, after, more := strings.Cut(tail, "/")
		switch {
		case seg == "", seg == ".", seg == "..":
			return "", forbidden // "//", "/./", "/../": never normalised into something else
		case seg[0] == '.':
			return "", forbidden // dotfiles and dot-directories: .env, .git/
		case strings.ContainsRune(seg, '\\'):
			return "", forbidden
		}
		if !more {
			break
		}
		tail = after
	}
	if path.Clean("/"+rest) != "/"+rest {
		return "", forbidden
	}
	return rest, lookUp
}

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

// open opens rel for a client that accepts the encodings in accept: a
// precompressed sibling when it has one the client takes. A missing file,
// a directory, or anything that is not a regular file is a miss.
func (h *Handler) open(rel, accept string) (*file, error) {
	br, gz := accepts(accept, "br"), accepts(accept, "gzip")
	key := cacheKey{rel, br, gz}
	now := time.Now().UnixNano()
	if c, ok := h.small.Load(key); ok {
		if e := c.(*smallFile); now-e.checked < int64(revalidate) {
			f := e.f // a copy: the request's own
			return &f, nil
		}
	}
	f, err := h.openFile(rel, br, gz)
	if err != nil || f.size > smallBody {
		if _, known := h.small.LoadAndDelete(key); known {
			h.smallCount.Add(-1) // gone, or grown: no longer kept
		}
		return f, err
	}
	// A small file is read whole and kept for a second: requests for it
	// meanwhile cost no system call.
	data, err := f.read(0, f.size)
	f.close()
	if err != nil {
		return nil, err
	}
	f.data, f.fd, f.f = data, -1, nil
	if _, known := h.small.Load(key); known || h.smallCount.Load() < maxSmall {
		if _, loaded := h.small.Swap(key, &smallFile{f: *f, checked: now}); !loaded {
			h.smallCount.Add(1)
		}
	}
	return f, nil
}

// revalidate is how long a small file read whole is served from memory
// before it is opened again: a change on disk shows within it.
const revalidate = time.Second

// maxSmall bounds the small files kept (each at most smallBody bytes).
const maxSmall = 4096

type cacheKey struct {
	rel    string
	br, gz bool
}

type smallFile struct {
	f       file
	checked int64 // when it was read, in Unix nanoseconds
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
		if fd, err = openat2(h.rootFd, rel, unix.RESOLVE_NO_SYMLINKS); err == unix.ELOOP {
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
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
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

func openat2(dirfd int, rel string, resolve uint64) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | resolve,
	}
	for {
		fd, err := unix.Openat2(dirfd, rel, &how)
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
}

// accepts reports whether an Accept-Encoding value takes enc: the first
// member naming it, unless its weight (a q parameter, in any case and any
// place among the member's parameters) is a qvalue of 0 (RFC 9110 12.4.2).
func accepts(accept, enc string) bool {
	for _, member := range strings.Split(accept, ",") {
		name, params, _ := strings.Cut(member, ";")
		if !strings.EqualFold(strings.Trim(name, " \t"), enc) {
			continue
		}
		for params != "" {
			var p string
			p, params, _ = strings.Cut(params, ";")
			k, v, ok := strings.Cut(p, "=")
			if ok && strings.EqualFold(strings.Trim(k, " \t"), "q") {
				return !zeroWeight(strings.Trim(v, " \t"))
			}
		}
		return true
	}
	return false
}

// zeroWeight reports whether a qvalue is 0: "0", "0.", or "0." and up to
// three zeros.
func zeroWeight(q string) bool {
	frac, ok := strings.CutPrefix(q, "0")
	if !ok {
		return false
	}
	if frac == "" {
		return true
	}
	frac, ok = strings.CutPrefix(frac, ".")
	return ok && len(frac) <= 3 && strings.Trim(frac, "0") == ""
}
