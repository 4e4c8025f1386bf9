package realtime

import (
	"cmp"
	"slices"
)

// Journal holds the newest frames a process has seen, of every channel, so
// that a client that reconnects is sent what it missed. Its rule is all or
// nothing: Since returns every frame of a channel after an id, or reports
// that it cannot. It is not safe for concurrent use; the hub guards it.
type Journal struct {
	ring  []*Frame // the newest frames, oldest at head
	head  int
	n     int
	epoch uint64
	// floor is the newest sequence number a frame may have and not be here:
	// every frame numbered above it that this process has seen still is.
	floor uint64
}

// NewJournal returns a journal of up to size frames (0 keeps none) that
// begins after start: the frames up to start went out before it, and are
// not in it.
func NewJournal(size int, start ID) *Journal {
	return &Journal{ring: make([]*Frame, size), epoch: start.Epoch, floor: start.Seq}
}

// Add records f, letting go of the oldest frame when the journal is full.
func (j *Journal) Add(f *Frame) {
	if len(j.ring) == 0 {
		j.floor = max(j.floor, f.ID.Seq)
		return
	}
	if j.n == len(j.ring) {
		j.floor = max(j.floor, j.ring[j.head].ID.Seq)
		j.ring[j.head] = f
		j.head = (j.head + 1) % len(j.ring)
		return
	}
	j.ring[(j.head+j.n)%len(j.ring)] = f
	j.n++
}

// Len returns how many frames the journal holds.
func (j *Journal) Len() int { return j.n }

// Since returns the frames of channel numbered after after, oldest first,
// when the journal holds every one of them; newest is the newest id
// allocated. ok is false when it cannot: after is from another epoch (an
// earlier run of the server), from the future, or older than the journal
// reaches.
func (j *Journal) Since(channel string, after, newest ID) (frames []*Frame, ok bool) {
	if after.Epoch != j.epoch || after.Epoch != newest.Epoch || after.Seq > newest.Seq || after.Seq < j.floor {
		return nil, false
	}
	sorted := true
	for i := 0; i < j.n; i++ {
		f := j.ring[(j.head+i)%len(j.ring)]
		if f.ID.Seq <= after.Seq || f.Channel != channel {
			continue
		}
		if len(frames) > 0 && frames[len(frames)-1].ID.Seq > f.ID.Seq {
			sorted = false // frames from other processes may arrive out of order
		}
		frames = append(frames, f)
	}
	if !sorted {
		slices.SortFunc(frames, func(a, b *Frame) int { return cmp.Compare(a.ID.Seq, b.ID.Seq) })
	}
	return frames, true
}
