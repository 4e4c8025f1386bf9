package wire

import (
	"context"
	"sync"
)

// Gate counts the requests a handler is serving and shuts it: after Close
// no request enters, and Close waits for those inside to leave.
type Gate struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // closed when n falls to 0 after Close
}

// Enter admits a request, or returns false once the gate is closed: the
// request is then answered 503.
func (g *Gate) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

// Leave lets a request out.
func (g *Gate) Leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// Close shuts the gate and waits for the requests inside to leave, or for
// ctx to end (its error then). It reports false when the gate was closed
// already.
func (g *Gate) Close(ctx context.Context) (first bool, err error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false, nil
	}
	g.closed = true
	if g.n == 0 {
		g.mu.Unlock()
		return true, nil
	}
	idle := make(chan struct{})
	g.idle = idle
	g.mu.Unlock()
	select {
	case <-idle:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}
