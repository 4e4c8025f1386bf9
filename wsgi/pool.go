package wsgi

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// pool bounds how many requests run Python at once: one slot per Python
// thread. A request takes a slot, locks its goroutine to its OS thread and
// runs the application there, on that thread's own thread state; no
// request changes OS threads midway, and none waits for a hand-off. When
// every slot is taken, requests wait in Go.
type pool struct {
	slots  chan int // the free slots
	closed chan struct{}
	once   sync.Once
	n      int
}

func newPool(n int) *pool {
	p := &pool{slots: make(chan int, n), closed: make(chan struct{}), n: n}
	for i := range n {
		p.slots <- i
	}
	return p
}

// acquire takes a slot; false when ctx ends first or the pool is shut down.
func (p *pool) acquire(ctx context.Context) (int, bool) {
	select {
	case <-p.closed:
		return 0, false
	default:
	}
	select {
	case i := <-p.slots: // a free slot: no need to watch ctx (its Done costs net/http a channel)
		return i, true
	default:
	}
	select {
	case i := <-p.slots:
		return i, true
	case <-ctx.Done():
		return 0, false
	case <-p.closed:
		return 0, false
	}
}

func (p *pool) release(i int) { p.slots <- i }

// shutdown refuses new requests and waits for the running ones to leave
// their threads, or for ctx to end; its error then names the threads still
// running.
func (p *pool) shutdown(ctx context.Context) error {
	first := false
	p.once.Do(func() { first = true; close(p.closed) })
	if !first {
		return ErrClosed
	}
	free := make([]bool, p.n)
	for left := p.n; left > 0; left-- {
		select {
		case i := <-p.slots:
			free[i] = true
			continue
		default:
		}
		select {
		case i := <-p.slots:
			free[i] = true
		case <-ctx.Done():
			// Take every slot freed meanwhile before naming the rest.
			for more := true; more; {
				select {
				case i := <-p.slots:
					free[i] = true
				default:
					more = false
				}
			}
			var busy []string
			for i, f := range free {
				if !f {
					busy = append(busy, fmt.Sprintf("python-%d", i+1))
				}
			}
			if len(busy) == 0 {
				return nil
			}
			return fmt.Errorf("wsgi: %s still running a request", strings.Join(busy, ", "))
		}
	}
	return nil
}
