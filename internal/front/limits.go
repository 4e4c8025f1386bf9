package front

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/m0serve/m0/internal/wire"
)

// DefaultBodyTimeout is m0serve's --body-timeout when none is named; a zero
// Limits.BodyTimeout is no timeout.
const DefaultBodyTimeout = 30 * time.Second

// Linger bounds how long a connection whose upload was refused with 413 is
// read and discarded before it closes, so that a client writing its whole
// body before it reads still reads the refusal. A smaller nonzero
// Limits.IdleTimeout bounds it too.
const Linger = 5 * time.Second

// Limits bound what one connection and one request may cost.
type Limits struct {
	MaxBody              int64                            // request body cap in bytes; 0 none (m0serve's default is wire.DefaultMaxBody)
	BodyTimeout          time.Duration                    // a body still arriving this long after its headers: 408; 0 never
	IdleTimeout          time.Duration                    // idle keep-alive close, and no-send-progress bound; 0 never
	MaxKeepaliveRequests int                              // close a connection after N requests; 0 never
	Logf                 func(format string, args ...any) // first-refusal lines; nil: stderr
}

// maxBody is the cap in bytes, or -1 for none.
func (l Limits) maxBody() int64 {
	if l.MaxBody <= 0 {
		return -1
	}
	return l.MaxBody
}

// linger is how long a refused upload is read and discarded; zero closes at
// once.
func (l Limits) linger() time.Duration {
	switch {
	case l.IdleTimeout <= 0:
		return 0
	case l.IdleTimeout < Linger:
		return l.IdleTimeout
	}
	return Linger
}

// forever stands for no deadline where a duration must be positive to
// replace one already set.
const forever = 100 * 365 * 24 * time.Hour

const (
	tooLarge = "Request Entity Too Large\n"
	timedOut = "Request Timeout\n"
)

// refusals prints the first refusal of each kind a server makes.
type refusals struct {
	lim            Limits
	size, deadline sync.Once
}

func (r *refusals) logf(format string, args ...any) {
	if r.lim.Logf != nil {
		r.lim.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (r *refusals) tooLarge() {
	r.size.Do(func() {
		r.logf("m0serve: refused a request body over --max-body %s with 413 (raise --max-body or M0_MAX_BODY)",
			wire.FormatSize(r.lim.maxBody()))
	})
}

func (r *refusals) timedOut() {
	r.deadline.Do(func() {
		r.logf("m0serve: refused a request body still arriving %s after its headers with 408 (raise --body-timeout or M0_BODY_TIMEOUT)",
			r.lim.BodyTimeout)
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
