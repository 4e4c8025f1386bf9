package static

import (
	"time"

	"github.com/m0serve/m0/internal/sock"
)

// open opens rel for a client that accepts the encodings in accept: a
// precompressed sibling when it has one the client takes. A missing file,
// a directory, or anything that is not a regular file is a miss.
func (h *Handler) open(rel, accept string) (*file, error) {
	br, gz := accepts(accept, "br"), accepts(accept, "gzip")
	key := cacheKey{rel, br, gz}
	now := sock.Mono()
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
	checked int64 // when it was read, a sock.Mono reading
}
