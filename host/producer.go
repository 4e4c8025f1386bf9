package host

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/m0serve/m0/realtime"
)

// hubPublisher is the Publisher of a process's hub. It publishes only an
// id it handed out and has not published yet.
type hubPublisher struct {
	hub   *realtime.Hub
	mu    sync.Mutex
	taken map[realtime.ID]struct{} // handed out by NextID, not published
}

// maxTaken bounds the ids taken and not published that are remembered;
// past it the oldest is forgotten (and refused).
const maxTaken = 1024

func newPublisher(hub *realtime.Hub) *hubPublisher {
	return &hubPublisher{hub: hub, taken: map[realtime.ID]struct{}{}}
}

func (p *hubPublisher) NextID() realtime.ID {
	id := p.hub.NextID()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.taken) >= maxTaken {
		oldest := id
		for t := range p.taken {
			if t.Seq < oldest.Seq {
				oldest = t
			}
		}
		delete(p.taken, oldest)
	}
	p.taken[id] = struct{}{}
	return id
}

func (p *hubPublisher) Publish(channel string, id realtime.ID, frame []byte) bool {
	p.mu.Lock()
	_, ok := p.taken[id]
	delete(p.taken, id)
	p.mu.Unlock()
	return ok && p.hub.PublishID(channel, id, frame)
}

// producerRun is a producer stepping on a goroutine of its own until the
// drain stops it.
type producerRun struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startProducer steps p until the drain; tick, when above 0 (M0_APP_TICK_MS),
// is the wait between steps in place of what Step returns.
func startProducer(p Producer, out Publisher, tick time.Duration) *producerRun {
	r := &producerRun{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
			wait := p.Step(out)
			if tick > 0 {
				wait = tick
			}
			t.Reset(max(wait, 0))
		}
	}()
	return r
}

// Shutdown stops the producer after its step and waits for it within ctx.
func (r *producerRun) Shutdown(ctx context.Context) error {
	r.once.Do(func() { close(r.stop) })
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return errors.New("the producer still in its step")
	}
}
