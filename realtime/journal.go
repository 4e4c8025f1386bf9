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
	have  map[uint64]struct{} // the sequence numbers in ring
}

// NewJournal returns a journal of up to size frames (0 keeps none) that
// begins after start: the frames up to start went out before it, and are
// not in it.
func NewJournal(size int, start ID) *Journal {
	return &Journal{ring: make([]*Frame, size), epoch: start.Epoch, floor: start.Seq,
		have: make(map[uint64]struct{}, size)}
}

// Add records f, letting go of the oldest frame when the journal is full.
// It reports false, recording nothing, when the journal holds f's id
// already (a frame that reached this process twice: from a sibling's
// journal, then live).
func (j *Journal) Add(f *Frame) bool {
	if len(j.ring) == 0 {
		j.floor = max(j.floor, f.ID.Seq)
		return true
	}
	if _, dup := j.have[f.ID.Seq]; dup && f.ID.Epoch == j.epoch {
		return false
	}
	j.have[f.ID.Seq] = struct{}{}
	if j.n == len(j.ring) {
		old := j.ring[j.head]
		delete(j.have, old.ID.Seq)
		j.floor = max(j.floor, old.ID.Seq)
		j.ring[j.head] = f
		j.head = (j.head + 1) % len(j.ring)
		return true
	}
	j.ring[(j.head+j.n)%len(j.ring)] = f
	j.n++
	return true
}

// holds reports whether the journal holds the frame id.
func (j *Journal) holds(id ID) bool {
	_, ok := j.have[id.Seq]
	return ok && id.Epoch == j.epoch
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

// Frames returns the journal's frames, oldest first, and its floor: the
// newest sequence number a frame may have and not be among them.
func (j *Journal) Frames() (floor uint64, frames []*Frame) {
	for i := 0; i < j.n; i++ {
		frames = append(frames, j.ring[(j.head+i)%len(j.ring)])
	}
	return j.floor, frames
}

// Merge adds another process's journal of the same epoch, frames above
// floor: the journal then reaches as far back as both did, keeping its
// newest frames when they do not all fit. A journal of another epoch is
// ignored.
func (j *Journal) Merge(epoch, floor uint64, frames []*Frame) {
	if epoch != j.epoch || len(j.ring) == 0 {
		return
	}
	have := map[uint64]bool{}
	_, mine := j.Frames()
	for _, f := range mine {
		have[f.ID.Seq] = true
	}
	all := mine
	for _, f := range frames {
		if f.ID.Epoch == epoch && f.ID.Seq > floor && !have[f.ID.Seq] {
			have[f.ID.Seq] = true
			all = append(all, f)
		}
	}
	slices.SortFunc(all, func(a, b *Frame) int { return cmp.Compare(a.ID.Seq, b.ID.Seq) })
	// The merged journal holds every frame above the lower floor that
	// either held, up to the newer frames the older missed: below the
	// higher floor only the other's frames count.
	j.floor = min(j.floor, floor)
	if drop := len(all) - len(j.ring); drop > 0 {
		j.floor = max(j.floor, all[drop-1].ID.Seq)
		all = all[drop:]
	}
	clear(j.ring)
	copy(j.ring, all)
	j.head, j.n = 0, len(all)
	clear(j.have)
	for _, f := range all {
		j.have[f.ID.Seq] = struct{}{}
	}
}

// Lose records that frames up to through may be missing: Since from
// before it reports that it cannot.
func (j *Journal) Lose(through ID) {
	if through.Epoch == j.epoch {
		j.floor = max(j.floor, through.Seq)
	}
}
