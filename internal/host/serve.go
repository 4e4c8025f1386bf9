package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/m0serve/m0/realtime"
)

// DrainTimeout bounds the whole drain: in-flight requests, the thread pool's
// join and the producers' join share it.
const DrainTimeout = 5 * time.Second

// Shutdowner is a piece the drain stops after the listener: a thread pool, a
// producer, an interpreter flushing its output. Its error names what is
// still running when ctx ends.
type Shutdowner interface {
	Shutdown(ctx context.Context) error
}

// Listen opens the listener for host and port: an IPv4 address listens on
// IPv4 alone, :: on IPv6 and IPv4 at once, any other IPv6 address on IPv6.
func Listen(host string, port int) (net.Listener, error) {
	network := "tcp4"
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		network = "tcp6"
		if ip.IsUnspecified() {
			network = "tcp"
		}
	} else if ip == nil {
		network = "tcp"
	}
	ln, err := net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, &StartupError{Msg: fmt.Sprintf("cannot listen on %s: %v", net.JoinHostPort(host, strconv.Itoa(port)), errors.Unwrap(err))}
	}
	return ln, nil
}

// NewHub returns the process's hub for a configuration, or nil when
// nothing needs one: under --realtime, or when want (the application has a
// producer).
func NewHub(c *Config, want bool) *realtime.Hub {
	if !c.Realtime && !want {
		return nil
	}
	return realtime.New(&realtime.Options{ReplayFrames: c.ReplayFrames, Heartbeat: c.SSEHeartbeat,
		KeepAlive: c.StreamKeepAlive})
}

// Wrapper puts what the flags ask for around a loop (package stack): the
// host takes it as an argument, so that it links the metrics only through
// its callers.
type Wrapper func(l *Loop, c *Config, hub *realtime.Hub) (*Loop, error)

// Run makes the application's loops, starts its producer, listens, prints
// the ready lines, serves until SIGTERM or SIGINT, and drains. It returns
// nil after a drain, however it ended: a drain that runs out of time names
// what was still running on stderr. plan is the one that passed.
func Run(plan *Plan, app App, wrap Wrapper, stdout, stderr io.Writer) error {
	cfg := plan.Config
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)

	prod, _ := app.(Producing)
	var producer Producer
	if prod != nil {
		producer = prod.Producer()
	}
	hub := NewHub(cfg, producer != nil)
	fmt.Fprintf(stdout, "[worker 0] pid=%d armed for a graceful stop\n", os.Getpid())

	// One loop per --threads, each with a handler of its own.
	loops := make([]*Loop, cfg.Threads)
	for i := range loops {
		l, err := app.Make(Context{Worker: i, Workers: cfg.Threads, Config: cfg, Hub: hub})
		if err != nil {
			return makeErr("the application's make", err)
		}
		if loops[i], err = wrap(l, cfg, hub); err != nil {
			return err
		}
	}
	var draining []func()
	var drain []Shutdowner
	if hub != nil {
		draining = append(draining, hub.Drain)
		drain = append(drain, hub)
	}
	if producer != nil {
		if err := producer.Make(Context{Workers: cfg.Threads, Config: cfg, Hub: hub}); err != nil {
			return makeErr("the producer's make", err)
		}
	}
	for _, l := range loops {
		draining = append(draining, l.Draining...)
		drain = append(drain, l.Drain...)
	}
	if err := ready(loops, stop); err != nil || stopped(stop) {
		return err // nil: stopped during start-up, nothing was served
	}
	ln, err := Listen(cfg.Host, cfg.Port)
	if err != nil {
		return err
	}
	servers := make([]server, len(loops))
	served := make(chan error, len(loops))
	var fan *fanListener
	if len(loops) > 1 {
		fan = newFan(ln, len(loops))
		go fan.run()
	}
	for i, l := range loops {
		servers[i] = newServer(l.Handler, cfg.Limits())
		var lln net.Listener = ln
		if fan != nil {
			lln = fan.loops[i]
		}
		go func(s server) { served <- s.Serve(lln) }(servers[i])
	}
	var runs *producerRun
	if producer != nil {
		runs = startProducer(producer, hubPublisher{hub})
		drain = append([]Shutdowner{runs}, drain...)
	}
	fmt.Fprintln(stdout, banner(plan, app, ln.Addr()))

	select {
	case <-stop:
	case err := <-served:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return &StartupError{Msg: "serving stopped: " + err.Error()}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	for _, f := range draining {
		f()
	}
	var wg sync.WaitGroup
	inFlight := make(chan struct{}, len(servers))
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.Shutdown(ctx) != nil {
				inFlight <- struct{}{}
			}
		}()
	}
	wg.Wait()
	if len(inFlight) > 0 {
		fmt.Fprintf(stderr, "m0serve: requests still in flight after %s; exiting anyway\n", DrainTimeout)
	}
	for _, d := range drain {
		if err := d.Shutdown(ctx); err != nil {
			fmt.Fprintf(stderr, "m0serve: %v after the %s drain; exiting anyway\n", err, DrainTimeout)
		}
	}
	return nil
}

// ready runs the loops' start-up steps, all at once; a SIGTERM or SIGINT
// meanwhile ends them (and is put back for the caller to see).
func ready(loops []*Loop, stop chan os.Signal) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, len(loops))
	n := 0
	for _, l := range loops {
		if l.Ready != nil {
			n++
			go func() { done <- l.Ready(ctx) }()
		}
	}
	for ; n > 0; n-- {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case sig := <-stop:
			stop <- sig
			return nil
		}
	}
	return nil
}

// stopped reports whether a signal to stop is waiting, leaving it there.
func stopped(stop chan os.Signal) bool {
	select {
	case sig := <-stop:
		stop <- sig
		return true
	default:
		return false
	}
}

// banner is the ready line.
func banner(p *Plan, app App, addr net.Addr) string {
	c := p.Config
	host := c.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := c.Port
	if a, ok := addr.(*net.TCPAddr); ok {
		port = a.Port
	}
	name, protocol, mode := app.Banner(p)
	workers := fmt.Sprintf("workers=%d", c.Workers)
	if c.Threads > 1 {
		workers += fmt.Sprintf(" threads=%d", c.Threads)
	}
	return fmt.Sprintf("🔥 m0serve: %s on http://%s:%d (protocol=%s %s) %s", name, host, port, protocol, workers, mode)
}

// sharedListener is the listener of every loop: the first loop's drain
// closes it, and the others' find it closed.
type sharedListener struct {
	net.Listener
	once sync.Once
	err  error
}

func (l *sharedListener) Close() error {
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}

// fanListener accepts for several loops: each connection goes to the
// loop with the fewest open, the next in turn among equals, so that the
// loops share the load whatever the scheduler does.
type fanListener struct {
	net.Listener
	loops []*loopListener
	next  int
	mu    sync.Mutex
}

// loopListener is one loop's side of a fanListener.
type loopListener struct {
	fan   *fanListener
	conns chan net.Conn
	open  atomic.Int64
}

func newFan(ln net.Listener, n int) *fanListener {
	f := &fanListener{Listener: &sharedListener{Listener: ln}}
	for range n {
		f.loops = append(f.loops, &loopListener{fan: f, conns: make(chan net.Conn)})
	}
	return f
}

// run accepts until the listener closes, then closes every loop's side.
func (f *fanListener) run() {
	defer func() {
		for _, l := range f.loops {
			close(l.conns)
		}
	}()
	for {
		c, err := f.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		l := f.pick()
		l.open.Add(1)
		l.conns <- &fanConn{Conn: c, l: l}
	}
}

func (f *fanListener) pick() *loopListener {
	best := -1
	for i := range f.loops {
		j := (f.next + i) % len(f.loops)
		if best < 0 || f.loops[j].open.Load() < f.loops[best].open.Load() {
			best = j
		}
	}
	f.next = (best + 1) % len(f.loops)
	return f.loops[best]
}

func (l *loopListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}

func (l *loopListener) Close() error   { return l.fan.Close() }
func (l *loopListener) Addr() net.Addr { return l.fan.Addr() }

// fanConn counts itself open on its loop until it is closed.
type fanConn struct {
	net.Conn
	l    *loopListener
	once sync.Once
}

func (c *fanConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// SyscallConn gives the connection's descriptor (wire.WatchClose, the
// keepalive of held sockets).
func (c *fanConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// CloseWrite half-closes the connection when the underlying one can.
func (c *fanConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
