package realtime

import (
	"strconv"
	"sync/atomic"
	"time"
)

// ID is a frame's event id: a sequence number and the epoch it counts in.
// Sequence numbers rise by one per frame from 1; the epoch tells one run of
// the counter from another, so an id from before a restart is never taken
// for a frame of this run that happens to carry the same number. The zero
// ID is no id.
type ID struct {
	Epoch uint64
	Seq   uint64
}

// String is the id as SSE sends it: the epoch in base 36, a hyphen, the
// sequence number in decimal ("mfz3k2a0-42").
func (id ID) String() string {
	b := make([]byte, 0, 24)
	b = strconv.AppendUint(b, id.Epoch, 36)
	b = append(b, '-')
	return string(strconv.AppendUint(b, id.Seq, 10))
}

// IsZero reports whether id is no id.
func (id ID) IsZero() bool { return id == ID{} }

// ParseID reads an id as String writes it. ok is false for anything else:
// a client's Last-Event-ID that is not one of ours.
func ParseID(s string) (id ID, ok bool) {
	dash := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			dash = i
			break
		}
	}
	if dash < 1 || dash == len(s)-1 || len(s) > 40 {
		return ID{}, false
	}
	epoch, err := strconv.ParseUint(s[:dash], 36, 64)
	if err != nil || !canonical(s[:dash], 36) {
		return ID{}, false
	}
	seq, err := strconv.ParseUint(s[dash+1:], 10, 64)
	if err != nil || !canonical(s[dash+1:], 10) {
		return ID{}, false
	}
	return ID{Epoch: epoch, Seq: seq}, true
}

// canonical reports whether digits is written as strconv writes numbers in
// base: lower case, no sign, no leading zero. One id has one spelling.
func canonical(digits string, base int) bool {
	if len(digits) > 1 && digits[0] == '0' {
		return false
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c == '+' || c == '-' || c == '_' || base == 36 && 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// IDSource hands out event ids. Every hub that shares subscribers' replay
// shares one: the workers of a server share a counter in shared memory,
// the machines of a cluster one in the database.
type IDSource interface {
	// Next allocates the next id.
	Next() ID
	// Newest returns the newest id allocated, by any user of the source;
	// its Seq is 0 before the first.
	Newest() ID
}

// Counter is the IDSource of one process: an atomic counter whose epoch is
// when it was made, in milliseconds, so that no two runs share one.
type Counter struct {
	epoch uint64
	seq   atomic.Uint64
}

// NewCounter returns a counter that starts at 1 in an epoch of its own:
// the time in milliseconds, later than any other counter's of the process.
func NewCounter() *Counter {
	now := uint64(time.Now().UnixMilli())
	for {
		last := lastEpoch.Load()
		epoch := max(now, last+1)
		if lastEpoch.CompareAndSwap(last, epoch) {
			return &Counter{epoch: epoch}
		}
	}
}

var lastEpoch atomic.Uint64

// Next allocates the next id.
func (c *Counter) Next() ID { return ID{Epoch: c.epoch, Seq: c.seq.Add(1)} }

// Newest returns the newest id allocated.
func (c *Counter) Newest() ID { return ID{Epoch: c.epoch, Seq: c.seq.Load()} }
