package host

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/metrics"
	"github.com/m0serve/m0/realtime"
	"github.com/m0serve/m0/static"
)

// wrap puts what the flags ask for around a loop's handler, whatever the
// application: the static directories in front of it, the first named
// outermost (a miss falls through to the next, then to the application),
// then the health path, the metrics and the access log.
func wrap(l *Loop, c *Config, hub *realtime.Hub) (*Loop, error) {
	var headers []static.Header
	for _, v := range c.StaticHeaders {
		hd, err := static.ParseHeader(v)
		if err != nil {
			return nil, &UsageError{Msg: "--static-header: " + err.Error()}
		}
		headers = append(headers, hd)
	}
	h := l.Handler
	dirs := c.StaticDirs()
	for i := len(dirs) - 1; i >= 0; i-- {
		s, err := static.New(dirs[i].Dir, &static.Options{Prefix: dirs[i].Prefix, CacheControl: c.StaticCacheControl,
			Headers: headers, Next: h})
		if err != nil {
			return nil, &Refusal{Found: err.Error(), Fix: "name a directory this process can open"}
		}
		h = s
	}
	h = m0.Health(c.HealthPath)(h)
	if c.Metrics {
		var opts []metrics.Option
		if hub != nil {
			opts = append(opts, metrics.Realtime(hub))
		}
		h = metrics.Middleware(metrics.Path, opts...)(h)
	}
	if c.AccessLog {
		h = m0.AccessLog(os.Stdout)(h)
	}
	w := *l
	w.Handler = h
	return &w, nil
}

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
