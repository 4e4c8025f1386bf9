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
	"syscall"
	"time"
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

// Worker is one serving process: its configuration, what it serves, and the
// pieces its drain stops.
type Worker struct {
	Config   *Config
	Spec     string // the application spec, for the banner
	Protocol string // for the banner
	// EventLoop, for an ASGI application on the executor, is its loop
	// ("uvloop" or "asyncio"), which the banner names in place of the
	// blocking threads.
	EventLoop string
	Handler   http.Handler
	// Drain is stopped in order after the listener, within DrainTimeout.
	Drain []Shutdowner
	// Ready, if set, runs after the armed line and before the listener
	// opens and the banner prints: an ASGI application's lifespan startup.
	// A SIGTERM or SIGINT meanwhile ends Run with nil and nothing served;
	// an error ends it with that error.
	Ready func(ctx context.Context) error
	// Draining is called as the drain begins, before in-flight requests
	// are waited for: a streaming response hears that its client is gone.
	Draining []func()

	Stdout io.Writer // the ready lines; nil means os.Stdout
	Stderr io.Writer // drain reports; nil means os.Stderr
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

// Run listens, prints the ready lines, serves until SIGTERM or SIGINT, and
// drains. It returns nil after a drain, however it ended: a drain that runs
// out of time names what was still running on Stderr.
func (w *Worker) Run() error {
	stdout, stderr := w.Stdout, w.Stderr
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)

	fmt.Fprintf(stdout, "[worker 0] pid=%d armed for a graceful stop\n", os.Getpid())
	if w.Ready != nil {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan error, 1)
		go func() { ready <- w.Ready(ctx) }()
		select {
		case err := <-ready:
			cancel()
			if err != nil {
				return err
			}
		case <-stop:
			cancel()
			return nil // stopped during start-up: nothing was served
		}
	}
	ln, err := Listen(w.Config.Host, w.Config.Port)
	if err != nil {
		return err
	}
	srv := newServer(w.Handler, w.Config.Limits())
	fmt.Fprintln(stdout, w.banner(ln.Addr()))

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-stop:
	case err := <-served:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return &StartupError{Msg: "serving stopped: " + err.Error()}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	for _, f := range w.Draining {
		f()
	}
	if err := srv.Shutdown(ctx); err != nil {
		fmt.Fprintf(stderr, "m0serve: requests still in flight after %s; exiting anyway\n", DrainTimeout)
	}
	for _, d := range w.Drain {
		if err := d.Shutdown(ctx); err != nil {
			fmt.Fprintf(stderr, "m0serve: %v after the %s drain; exiting anyway\n", err, DrainTimeout)
		}
	}
	return nil
}

func (w *Worker) banner(addr net.Addr) string {
	c := w.Config
	host := c.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := c.Port
	if a, ok := addr.(*net.TCPAddr); ok {
		port = a.Port
	}
	s := fmt.Sprintf("🔥 m0serve: %s on http://%s:%d (protocol=%s workers=1)", w.Spec, host, port, w.Protocol)
	if w.EventLoop != "" {
		return s + " loop=pump event-loop=" + w.EventLoop
	}
	threads, auto := c.PoolSize()
	s += fmt.Sprintf(" blocking-threads=%d", threads)
	if auto {
		s += " (auto)"
	}
	return s
}
