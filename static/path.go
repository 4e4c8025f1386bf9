package static

import (
	"strings"
)

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
	// Every segment is a name (none empty, "." or ".."), so rest is as
	// path.Clean would leave it.
	return rest, lookUp
}
