package m0

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
	Handler  http.Handler
	// Drain is stopped in order after the listener, within DrainTimeout.
	Drain []Shutdowner

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
	ln, err := Listen(w.Config.Host, w.Config.Port)
	if err != nil {
		return err
	}
	srv := newServer(w.Handler, w.Config.Limits())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)

	fmt.Fprintf(stdout, "[worker 0] pid=%d armed for a graceful stop\n", os.Getpid())
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
	threads, auto := c.PoolSize()
	s := fmt.Sprintf("🔥 m0serve: %s on http://%s:%d (protocol=%s workers=1) blocking-threads=%d",
		w.Spec, host, port, w.Protocol, threads)
	if auto {
		s += " (auto)"
	}
	return s
}
