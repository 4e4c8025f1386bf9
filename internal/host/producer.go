package host

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/m0serve/m0/realtime"
)

// hubPublisher is the Publisher of a process's hub.
type hubPublisher struct{ hub *realtime.Hub }

func (p hubPublisher) Publish(channel string, id realtime.ID, frame []byte) bool {
	return p.hub.PublishID(channel, id, frame)
}

func (p hubPublisher) NextID() realtime.ID { return p.hub.NextID() }

// producerRun is a producer stepping on a goroutine of its own until the
// drain stops it.
type producerRun struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func startProducer(p Producer, out Publisher) *producerRun {
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
			t.Reset(max(p.Step(out), 0))
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
