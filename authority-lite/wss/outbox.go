package wss

import (
	"context"
	"sync"
)

// outbox holds what one connection is about to send: a control lane for
// replies (HELLO, ACK, ERROR, PING, BACKPRESSURE) and one bounded lane per
// Group for EVENT frames. The single writer pops one frame at a time and
// takes the non-empty lanes in round robin, so a busy Group delays every
// other lane by at most one frame per turn, and a full Group lane makes
// only that Group's streamer wait.
//
// Lanes have generations: re-SUBSCRIBE resets a Group's lane, and a push
// that names an older generation is refused, so a replaced stream can never
// slip a frame in after its successor started.
type outbox struct {
	mu        sync.Mutex
	control   *lane
	groups    map[string]*lane
	ready     []*lane // lanes holding frames, in round-robin order
	groupCap  int
	gen       uint64 // the last generation given to a lane, of any Group
	final     []byte // sent once control has drained; then the writer stops
	finishing bool   // group frames are dropped, only control and final go out
	closed    bool   // nothing more is accepted
	wake      chan struct{}
}

type lane struct {
	key    string
	gen    uint64
	buf    [][]byte // ring of len cap
	head   int
	n      int
	queued bool          // in outbox.ready
	ended  bool          // its stream ended: removed once drained (remove)
	space  chan struct{} // closed when a full lane drains to half; nil if nobody waits
}

type pushResult int

const (
	pushed pushResult = iota
	laneFull
	laneStale // the lane was reset or the outbox finished: give up
)

func newOutbox(groupCap, controlCap int) *outbox {
	return &outbox{
		control:  &lane{key: "", buf: make([][]byte, controlCap)},
		groups:   map[string]*lane{},
		groupCap: groupCap,
		wake:     make(chan struct{}, 1),
	}
}

// pushLocked appends frame to l unless l is full or gen is not current. On
// laneFull it returns a channel closed when there is room again.
func (o *outbox) pushLocked(l *lane, gen uint64, frame []byte) (pushResult, <-chan struct{}) {
	if o.closed || l.gen != gen || (o.finishing && l != o.control) {
		return laneStale, nil
	}
	if l.n == len(l.buf) {
		if l.space == nil {
			l.space = make(chan struct{})
		}
		return laneFull, l.space
	}
	l.buf[(l.head+l.n)%len(l.buf)] = frame
	l.n++
	if !l.queued {
		l.queued = true
		o.ready = append(o.ready, l)
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return pushed, nil
}

// pushGroup offers one EVENT frame of generation gen to a Group lane.
func (o *outbox) pushGroup(groupID string, gen uint64, frame []byte) (pushResult, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.groups[groupID]
	if !ok {
		return laneStale, nil
	}
	return o.pushLocked(l, gen, frame)
}

// pushControl queues a reply, waiting while the control lane is full. It
// returns false when ctx ends or the outbox no longer accepts frames.
func (o *outbox) pushControl(ctx context.Context, frame []byte) bool {
	return o.pushControlFor(ctx, "", 0, frame)
}

// pushControlFor is pushControl for a frame about one Group's stream
// (BACKPRESSURE, stream errors): it is dropped once that stream has been
// replaced. groupID "" means no such condition.
func (o *outbox) pushControlFor(ctx context.Context, groupID string, gen uint64, frame []byte) bool {
	for {
		o.mu.Lock()
		var (
			r     = laneStale
			space <-chan struct{}
		)
		if g, ok := o.groups[groupID]; groupID == "" || ok && g.gen == gen && !o.finishing {
			r, space = o.pushLocked(o.control, o.control.gen, frame)
		}
		o.mu.Unlock()
		switch r {
		case pushed:
			return true
		case laneStale:
			return false
		}
		select {
		case <-space:
		case <-ctx.Done():
			return false
		}
	}
}

// reset starts a new generation of a Group's lane (creating it): queued
// frames are dropped and waiters are woken to find themselves stale.
func (o *outbox) reset(groupID string) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.groups[groupID]
	if !ok {
		l = &lane{key: groupID, buf: make([][]byte, o.groupCap)}
		o.groups[groupID] = l
	}
	// Generations never repeat, even for a lane removed and made again.
	o.gen++
	l.gen, l.ended = o.gen, false
	o.dropLocked(l)
	return l.gen
}

// remove deletes a Group's lane once its stream of generation gen ended
// and the frames it queued are written (pop), unless a later reset gave
// the lane a newer one: a connection keeps lanes for the streams it runs,
// not for every Group it ever streamed.
func (o *outbox) remove(groupID string, gen uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l, ok := o.groups[groupID]; ok && l.gen == gen {
		l.ended = true
		if l.n == 0 {
			o.dropLocked(l)
			delete(o.groups, groupID)
		}
	}
}

// streams reports whether a Group has a lane: its stream runs.
func (o *outbox) streams(groupID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.groups[groupID]
	return ok
}

// streamCount is how many Groups have a lane.
func (o *outbox) streamCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.groups)
}

// dropLocked empties l, takes it out of the round robin and wakes waiters.
func (o *outbox) dropLocked(l *lane) {
	clear(l.buf)
	l.head, l.n = 0, 0
	if l.queued {
		l.queued = false
		for i, r := range o.ready {
			if r == l {
				o.ready = append(o.ready[:i], o.ready[i+1:]...)
				break
			}
		}
	}
	if l.space != nil {
		close(l.space)
		l.space = nil
	}
}

// pop returns the next frame in round-robin order. last reports the final
// frame (see finish), after which the writer stops; ok is false when there
// is nothing to send yet.
func (o *outbox) pop() (frame []byte, last, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.ready) == 0 {
		if o.finishing && o.final != nil {
			f := o.final
			o.final = nil
			return f, true, true
		}
		return nil, false, false
	}
	l := o.ready[0]
	o.ready = o.ready[1:]
	frame = l.buf[l.head]
	l.buf[l.head] = nil
	l.head = (l.head + 1) % len(l.buf)
	l.n--
	if l.n > 0 {
		o.ready = append(o.ready, l)
	} else {
		l.queued = false
		if l.ended && o.groups[l.key] == l {
			delete(o.groups, l.key)
		}
	}
	if l.space != nil && l.n <= len(l.buf)/2 {
		close(l.space)
		l.space = nil
	}
	return frame, false, true
}

// offerControl queues a reply unless the control lane is full (then the
// frame is dropped); false when it was not queued.
func (o *outbox) offerControl(frame []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, _ := o.pushLocked(o.control, o.control.gen, frame)
	return r == pushed
}

// stopEvents drops every queued EVENT frame and refuses later ones; replies
// still go out.
func (o *outbox) stopEvents() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finishing = true
	for _, l := range o.groups {
		o.dropLocked(l)
	}
}

// finish drops every queued EVENT frame and arranges for frame to be the
// last one written, after the replies already queued.
func (o *outbox) finish(frame []byte) {
	o.stopEvents()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.final = frame
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// close refuses every later push and wakes all waiters.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	for _, l := range o.groups {
		o.dropLocked(l)
	}
	o.dropLocked(o.control)
}

// queued reports how many frames a lane holds ("" is the control lane).
func (o *outbox) queued(groupID string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if groupID == "" {
		return o.control.n
	}
	if l, ok := o.groups[groupID]; ok {
		return l.n
	}
	return 0
}
