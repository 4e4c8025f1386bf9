package wsgi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/m0serve/m0/internal/cpython"
)

// pool is a fixed set of Python threads taking requests from one queue.
type pool struct {
	jobs    chan *job
	quit    chan struct{}
	once    sync.Once
	done    sync.WaitGroup
	workers []*worker
}

type worker struct {
	name string
	busy atomic.Bool
}

func newPool(rt *cpython.Runtime, n int, serve func(*cpython.Thread, *job)) *pool {
	p := &pool{jobs: make(chan *job), quit: make(chan struct{})}
	for i := range n {
		w := &worker{name: fmt.Sprintf("python-%d", i+1)}
		p.workers = append(p.workers, w)
		p.done.Add(1)
		rt.Go(w.name, func(t *cpython.Thread) {
			defer p.done.Done()
			for {
				select {
				case j := <-p.jobs:
					w.busy.Store(true)
					serve(t, j)
					w.busy.Store(false)
				case <-p.quit:
					return
				}
			}
		})
	}
	return p
}

// submit queues j for the next free thread. It returns false, having run
// nothing, when ctx ends first or the pool is shut down.
func (p *pool) submit(ctx context.Context, j *job) bool {
	select {
	case p.jobs <- j:
		return true
	case <-ctx.Done():
		return false
	case <-p.quit:
		return false
	}
}

func (p *pool) shutdown(ctx context.Context) error {
	first := false
	p.once.Do(func() { first = true; close(p.quit) })
	if !first {
		return ErrClosed
	}
	joined := make(chan struct{})
	go func() { p.done.Wait(); close(joined) }()
	select {
	case <-joined:
		return nil
	case <-ctx.Done():
	}
	var busy []string
	for _, w := range p.workers {
		if w.busy.Load() {
			busy = append(busy, w.name)
		}
	}
	return fmt.Errorf("wsgi: %s still running a request", strings.Join(busy, ", "))
}
