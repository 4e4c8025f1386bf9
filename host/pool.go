package host

import (
	"context"
	"fmt"
	"github.com/m0serve/m0/middleware"
	"io"
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
// Where the host holds streams (guard), a stream (M0-Hold) begun on a pool
// thread is refused with 409.
type pool struct {
	router LoopRouter
	loop   http.Handler // the loop's handler, with its holds
	guard  bool
	jobs   chan *job
	stop   chan struct{}
	once   sync.Once
	cut    chan struct{} // closed by Cutoff: a request waits for no thread
	cutOne sync.Once
	wg     sync.WaitGroup
}

// fastPool is a pool whose handlers all serve fasthttp.
type fastPool struct {
	*pool
	fastRouter FastLoopRouter
	fastLoop   fasthttp.RequestHandler
}

type job struct {
	w     http.ResponseWriter
	r     *http.Request
	fast  *fasthttp.RequestCtx
	done  chan struct{}
	panic any // what the handler panicked with, for the request's goroutine
}

var jobs = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}

// newPool starts a pool thread for each of threads, behind own (the loop's
// handler as the application made it) served as loop; guard refuses holds
// begun on the pool threads.
func newPool(own, loop http.Handler, threads []http.Handler, guard bool) (http.Handler, *pool) {
	p := &pool{loop: loop, guard: guard, jobs: make(chan *job), stop: make(chan struct{}), cut: make(chan struct{})}
	p.router, _ = own.(LoopRouter)
	fast := true
	for _, h := range threads {
		_, ok := h.(middleware.FastHandler)
		fast = fast && ok
	}
	fl, isFast := loop.(middleware.FastHandler)
	fast = fast && isFast
	for _, h := range threads {
		p.wg.Add(1)
		go p.thread(h, fast)
	}
	if !fast {
		return p, p
	}
	fp := &fastPool{pool: p, fastLoop: fl.ServeFastHTTP}
	fp.fastRouter, _ = own.(FastLoopRouter)
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
		fh = h.(middleware.FastHandler).ServeFastHTTP
	}
	for {
		select {
		case <-p.stop:
			return
		case j := <-p.jobs:
			p.serve(j, h, fh)
			j.done <- struct{}{}
		}
	}
}

// serve runs one job; a panic is handed back to the request's goroutine,
// where it does what it would have done without a pool.
func (p *pool) serve(j *job, h http.Handler, fh fasthttp.RequestHandler) {
	defer func() { j.panic = recover() }()
	if j.fast != nil {
		fh(j.fast)
		if p.guard {
			refuseFastHold(j.fast)
		}
		return
	}
	if !p.guard {
		h.ServeHTTP(j.w, j.r)
		return
	}
	hw := realtime.NewHoldWriter(j.w)
	h.ServeHTTP(hw, j.r)
	if held, _ := hw.Held(); held {
		refuseHold(j.w)
	}
}

// queue hands j to a pool thread and waits for it to be served; false
// when the pool has stopped or the request ended (its client left) while
// it waited.
func (p *pool) queue(j *job, gone <-chan struct{}) bool {
	select {
	case p.jobs <- j:
		<-j.done
		if v := j.panic; v != nil {
			j.panic = nil
			panic(v)
		}
		return true
	case <-p.stop:
		return false
	case <-p.cut:
		return false
	case <-gone:
		return false
	}
}

// Cutoff answers 503 every request waiting for a pool thread, and from
// then on every one that finds none free (wsgi.Pool.Cutoff's rule).
func (p *pool) Cutoff() { p.cutOne.Do(func() { close(p.cut) }) }

func (p *pool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.router != nil && p.router.OnLoop(r) {
		p.loop.ServeHTTP(w, r)
		return
	}
	j := jobs.Get().(*job)
	j.w, j.r = w, r
	ok := p.queue(j, r.Context().Done())
	j.w, j.r = nil, nil
	jobs.Put(j)
	if !ok {
		wire.Error(w, http.StatusServiceUnavailable, true)
	}
}

func (p *fastPool) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	if p.fastRouter != nil && p.fastRouter.OnLoopFast(ctx) {
		p.fastLoop(ctx)
		return
	}
	j := jobs.Get().(*job)
	j.fast = ctx
	ok := p.queue(j, nil)
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

// refuseHold answers 409 in place of a hold a pool thread's handler
// approved (realtime.HoldWriter kept all of it from the client).
func refuseHold(w http.ResponseWriter) {
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusConflict)
	io.WriteString(w, holdRefusal)
}

// refuseFastHold is refuseHold for fasthttp, once the handler returned.
func refuseFastHold(ctx *fasthttp.RequestCtx) {
	if ctx.Hijacked() || len(ctx.Response.Header.Peek(realtime.HeaderHold)) == 0 {
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
	loop map[string]bool // the patterns HandleLoop registered
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{loop: map[string]bool{}} }

// HandleLoop registers h for pattern, answered on the loop.
func (m *Mux) HandleLoop(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, h)
	if m.loop == nil {
		m.loop = map[string]bool{}
	}
	m.loop[pattern] = true
}

// HandleLoopFunc registers f for pattern, answered on the loop.
func (m *Mux) HandleLoopFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.HandleLoop(pattern, http.HandlerFunc(f))
}

// OnLoop reports whether the route that serves r was registered with
// HandleLoop.
func (m *Mux) OnLoop(r *http.Request) bool {
	if len(m.loop) == 0 {
		return false
	}
	_, pattern := m.ServeMux.Handler(r)
	return m.loop[pattern]
}
