package host

import (
	"context"
	"errors"
	"fmt"
	"github.com/m0serve/m0/asgi"
	"net/http"
	"time"

	"github.com/m0serve/m0/realtime"
	"github.com/m0serve/m0/wsgi"
)

// Context is what the host tells each make: which accept loop (worker) and
// which thread of it the handler is for, and the resolved configuration.
type Context struct {
	// Worker counts the accept loops from 0: the worker processes, or the
	// loops of one process under --threads; Workers is how many there are.
	Worker, Workers int
	// Thread is 0 for the loop's own handler and 1 to Threads for the
	// handler of a pool thread behind it.
	Thread, Threads int
	Config          *Config
	// Hub is the process's channels, under --realtime or when the
	// application has a producer; nil otherwise.
	Hub *realtime.Hub

	loop  *Loop  // what Ready and Drain add to, for the loop being made
	stuck func() // called when every Python thread is past --timeout at once
}

// Ready adds a step the host runs before it listens: an ASGI handler's
// Startup (its lifespan), say. An error ends start-up with it.
func (c Context) Ready(f func(ctx context.Context) error) {
	if c.loop == nil {
		panic("host: Context.Ready outside Make")
	}
	c.loop.Ready = chainReady(c.loop.Ready, f)
}

// Drain adds a piece the drain stops, in order, after the listener and
// within DrainTimeout: a wsgi, asgi or static handler's Shutdown. One
// that also has a Drain method (asgi.Handler, realtime.Hub) hears it as
// the drain begins, before in-flight requests are waited for.
func (c Context) Drain(s Shutdowner) {
	if c.loop == nil {
		panic("host: Context.Drain outside Make")
	}
	if d, ok := s.(interface{ Drain() }); ok {
		c.loop.Draining = append(c.loop.Draining, d.Drain)
	}
	c.loop.Drain = append(c.loop.Drain, s)
}

// chainReady runs a then b.
func chainReady(a, b func(context.Context) error) func(context.Context) error {
	if a == nil {
		return b
	}
	return func(ctx context.Context) error {
		if err := a(ctx); err != nil {
			return err
		}
		return b(ctx)
	}
}

// Loop is what an application makes for one accept loop: its handler and
// the steps of its start and its drain.
type Loop struct {
	Handler http.Handler
	// Ready, if set, runs before the listener opens: an ASGI lifespan
	// startup. An error ends start-up with it.
	Ready func(ctx context.Context) error
	// Draining is called as the drain begins, before in-flight requests
	// are waited for.
	Draining []func()
	// Drain is stopped in order after the listener, within DrainTimeout.
	Drain []Shutdowner

	pool   *wsgi.Pool    // the WSGI bridges' pool, shared by the loop's (Bridge)
	holds  bool          // Bridge put the held streams where they belong
	inline *asgi.Handler // the executor whose inline front end serves the loop (M0_INVERTED)
}

// Producer is work on a cadence, off the request path. One runs, on a
// goroutine of worker 0: Make once, then Step until the drain, each Step
// returning how long to wait before the next.
type Producer interface {
	Make(ctx Context) error
	Step(out Publisher) time.Duration
}

// Publisher is where a producer's frames go: every loop's held streams.
type Publisher interface {
	// Publish hands frame to the subscribers of channel as event id (from
	// NextID). It returns false, and sends nothing, for a frame the
	// channel refused: a name realtime.ValidChannel refuses, a frame over
	// realtime.MaxFrame bytes, or an id NextID did not hand out or that
	// was published already. Publish each id as soon as it is taken: a
	// frame published after one numbered later reaches live streams out
	// of order, and a client that resumes from the later one is not sent
	// it.
	Publish(channel string, id realtime.ID, frame []byte) bool
	// NextID allocates the next event id from the shared counter.
	NextID() realtime.ID
}

// makeErr makes an error a make returned an exit: its own code when it
// has one, 78 and its message otherwise. what names the maker.
func makeErr(what string, err error) error {
	var r *refusal
	var u *UsageError
	var s *startupError
	if errors.As(err, &r) || errors.As(err, &u) || errors.As(err, &s) {
		return err
	}
	return &refusal{Found: fmt.Sprintf("%s failed: %v", what, err),
		Fix: "fix what it reports; a failing make is not retried"}
}

// topologyChecks are the checks of what the application declares against
// the configuration: max_workers and max_threads.
func topologyChecks(c *Config, app *adapted) []Check {
	var cs []Check
	for _, d := range []struct {
		what, setting string
		have, most    int
	}{
		{"workers", "M0_WORKERS", c.Workers, app.MaxWorkers()},
		{"threads", "M0_THREADS", c.Threads, app.MaxThreads()},
	} {
		if d.most <= 0 {
			continue
		}
		ch := Check{Name: "max-" + d.what, OK: d.have <= d.most}
		if !ch.OK {
			ch.Detail = fmt.Sprintf("%d %s, and the application runs under at most %d (max_%s)", d.have, d.what, d.most, d.what)
			if why := app.Why(d.what); why != "" {
				ch.Detail += ": " + why
			}
			ch.Fix = fmt.Sprintf("pass --%s or set %s to at most %d", d.what, d.setting, d.most)
			ch.Exit = ExitConfig
		}
		cs = append(cs, ch)
	}
	if c.PGListen != "" {
		ch := Check{Name: "pg-listen-realtime", OK: c.Realtime || app.Producer() != nil}
		if !ch.OK {
			ch.Detail = "--pg-listen shares realtime frames between instances, and this server holds none"
			ch.Fix, ch.Exit = "pass --realtime, or leave --pg-listen and M0_PG_LISTEN unset", ExitConfig
		}
		cs = append(cs, ch)
	}
	if c.AppTick > 0 {
		ch := Check{Name: "app-tick", OK: app.Producer() != nil}
		if !ch.OK {
			ch.Detail = fmt.Sprintf("M0_APP_TICK_MS=%d sets a producer's cadence, and the application has no producer", c.AppTick.Milliseconds())
			ch.Fix, ch.Exit = "unset M0_APP_TICK_MS", ExitConfig
		}
		cs = append(cs, ch)
	}
	return cs
}
