package host

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"

	"github.com/m0serve/m0/internal/wire"
	"github.com/m0serve/m0/realtime"
	"github.com/valyala/fasthttp"
)

// LoopRouter is a loop's handler that answers some requests on the loop
// itself: those OnLoop reports true for are never queued for the pool
// (Mux.HandleLoop registers them). Without one, every request goes to the
// pool when there is one.
type LoopRouter interface {
	OnLoop(r *http.Request) bool
}

// FastLoopRouter is LoopRouter for a handler that serves fasthttp.
type FastLoopRouter interface {
	OnLoopFast(ctx *fasthttp.RequestCtx) bool
}

// pool is a loop's handler under --blocking-threads N: the requests its
// router keeps on the loop are answered there, the others are queued for N
// OS threads, each serving one request at a time with a handler of its own.
// A stream (M0-Hold) begun on a pool thread is refused with 409.
type pool struct {
	router LoopRouter
	loop   http.Handler // the loop's handler, with its holds
	jobs   chan *job
	stop   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

// fastPool is a pool whose handlers all serve fasthttp.
type fastPool struct {
	*pool
	router FastLoopRouter
	loop   fasthttp.RequestHandler
}

type job struct {
	w    http.ResponseWriter
	r    *http.Request
	fast *fasthttp.RequestCtx
	done chan struct{}
}

var jobs = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}

type fastHandler interface {
	ServeFastHTTP(*fasthttp.RequestCtx)
}

// newPool starts a pool thread for each of threads, behind own (the loop's
// handler as the application made it) served as loop.
func newPool(own, loop http.Handler, threads []http.Handler) (http.Handler, *pool) {
	p := &pool{loop: loop, jobs: make(chan *job), stop: make(chan struct{})}
	p.router, _ = own.(LoopRouter)
	fast := true
	for _, h := range threads {
		_, ok := h.(fastHandler)
		fast = fast && ok
	}
	fl, isFast := loop.(fastHandler)
	fast = fast && isFast
	for _, h := range threads {
		p.wg.Add(1)
		go p.thread(h, fast)
	}
	if !fast {
		return p, p
	}
	fp := &fastPool{pool: p, loop: fl.ServeFastHTTP}
	fp.router, _ = own.(FastLoopRouter)
	return fp, p
}

// thread is one pool thread: an OS thread of its own, for a handler that
// may keep state tied to one (a C library's, say).
func (p *pool) thread(h http.Handler, fast bool) {
	defer p.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var fh fasthttp.RequestHandler
	if fast {
		fh = h.(fastHandler).ServeFastHTTP
	}
	for {
		select {
		case <-p.stop:
			return
		case j := <-p.jobs:
			if j.fast != nil {
				fh(j.fast)
				refuseFastHold(j.fast)
			} else {
				g := &holdGuard{ResponseWriter: j.w}
				h.ServeHTTP(g, j.r)
				if !g.wrote {
					g.WriteHeader(http.StatusOK) // a hold with no body is refused too
				}
			}
			j.done <- struct{}{}
		}
	}
}

// queue hands j to a pool thread and waits for it to be served; false
// when the pool has stopped.
func (p *pool) queue(j *job) bool {
	select {
	case p.jobs <- j:
		<-j.done
		return true
	case <-p.stop:
		return false
	}
}

func (p *pool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.router != nil && p.router.OnLoop(r) {
		p.loop.ServeHTTP(w, r)
		return
	}
	j := jobs.Get().(*job)
	j.w, j.r = w, r
	ok := p.queue(j)
	j.w, j.r = nil, nil
	jobs.Put(j)
	if !ok {
		wire.Error(w, http.StatusServiceUnavailable, true)
	}
}

func (p *fastPool) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	if p.router != nil && p.router.OnLoopFast(ctx) {
		p.loop(ctx)
		return
	}
	j := jobs.Get().(*job)
	j.fast = ctx
	ok := p.queue(j)
	j.fast = nil
	jobs.Put(j)
	if !ok {
		wire.FastError(ctx, http.StatusServiceUnavailable, true)
	}
}

// Shutdown stops the pool threads once each has served its request, and
// waits for them within ctx.
func (p *pool) Shutdown(ctx context.Context) error {
	p.once.Do(func() { close(p.stop) })
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pool threads still serving")
	}
}

// holdRefusal is the body of the 409 a stream begun on a pool thread gets.
const holdRefusal = "a stream (M0-Hold) is begun on the loop, not on a pool thread: register its route with Mux.HandleLoop\n"

// holdGuard refuses a response a pool thread's handler begins with
// M0-Hold: 409 in its place, and the handler's body discarded.
type holdGuard struct {
	http.ResponseWriter
	wrote, refused bool
}

func (g *holdGuard) WriteHeader(code int) {
	if g.wrote {
		return
	}
	g.wrote = true
	h := g.Header()
	if h.Get(realtime.HeaderHold) == "" {
		g.ResponseWriter.WriteHeader(code)
		return
	}
	g.refused = true
	for k := range h {
		delete(h, k)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	g.ResponseWriter.WriteHeader(http.StatusConflict)
	g.ResponseWriter.Write([]byte(holdRefusal))
}

func (g *holdGuard) Write(b []byte) (int, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	if g.refused {
		return len(b), nil
	}
	return g.ResponseWriter.Write(b)
}

// Unwrap is for http.ResponseController: Flush and deadlines reach the
// connection's writer.
func (g *holdGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// refuseFastHold is holdGuard for fasthttp, once the handler returned.
func refuseFastHold(ctx *fasthttp.RequestCtx) {
	if len(ctx.Response.Header.Peek(realtime.HeaderHold)) == 0 {
		return
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(http.StatusConflict)
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(holdRefusal)
}

// Mux is an http.ServeMux whose routes run on a pool thread when there is
// a pool, except those registered with HandleLoop, which are answered on
// the loop and never queued: the routes that begin a held stream, and
// quick answers a slow view must not wait behind.
type Mux struct {
	http.ServeMux
	loop http.ServeMux
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{} }

// HandleLoop registers h for pattern, answered on the loop.
func (m *Mux) HandleLoop(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, h)
	m.loop.Handle(pattern, h)
}

// HandleLoopFunc registers f for pattern, answered on the loop.
func (m *Mux) HandleLoopFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.HandleLoop(pattern, http.HandlerFunc(f))
}

// OnLoop reports whether r's route was registered with HandleLoop.
func (m *Mux) OnLoop(r *http.Request) bool {
	_, pattern := m.loop.Handler(r)
	if pattern == "" {
		return false
	}
	_, all := m.ServeMux.Handler(r)
	return all == pattern
}
