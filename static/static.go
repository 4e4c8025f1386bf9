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
	"context"
	"errors"
	"fmt"
	"github.com/m0serve/m0/middleware"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

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

// prefixOf is Options.Prefix as the handler matches it: "/static/".
func prefixOf(opt string) string {
	prefix := "/" + strings.Trim(opt, "/")
	if prefix != "/" {
		prefix += "/"
	}
	return prefix
}

// Claims reports whether a handler made with Options.Prefix prefix answers
// the decoded path p itself (a file, or a refusal) rather than passing it
// to the next handler: what a front end that serves requests apart from
// the handler asks before it does.
func Claims(prefix, p string) bool {
	pre := prefixOf(prefix)
	return strings.HasPrefix(p, pre) || p+"/" == pre
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
	rootFd, realDir := -1, ""
	if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		// dir as fdPath names the files beneath it: absolute, no symlink in
		// it, in the system's spelling (its case, on a case-insensitive
		// volume).
		realDir, _ = fdPath(fd)
		// openat2 (Linux 5.6) keeps every lookup beneath the directory in the
		// kernel, in one system call; os.Root serves where it is missing.
		if probe, err := openat2(fd, ".", 0); err == nil {
			unix.Close(probe)
			rootFd = fd
		} else {
			unix.Close(fd)
		}
	}
	prefix := prefixOf(opts.Prefix)
	h := &Handler{dir: dir, root: root, rootFd: rootFd, realDir: realDir, prefix: prefix, cache: opts.CacheControl, headers: opts.Headers,
		svgPolicy: true, next: opts.Next}
	seen := map[string]bool{}
	for _, hd := range opts.Headers {
		if wire.EqualFold(hd.Name, "Content-Security-Policy") {
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
