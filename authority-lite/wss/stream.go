package wss

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// filter is a SUBSCRIBE attention filter. It narrows live delivery only
// (spec 17.2): replay is the durable history and is sent whole.
type filter struct {
	types []protocol.EventType
	items []string
}

func newFilter(f *protocol.SubscribeFilter) filter {
	if f == nil {
		return filter{}
	}
	return filter{types: f.Types, items: f.WorkItemIDs}
}

// match is true when every present list admits ev.
func (f filter) match(ev *StoredEvent) bool {
	if len(f.types) > 0 && !slices.Contains(f.types, ev.Type) {
		return false
	}
	return len(f.items) == 0 || ev.WorkItemID != "" && slices.Contains(f.items, ev.WorkItemID)
}

// delivery hands the connection's one delivery loop (deliver) its work:
// subscriptions started by the reader and Groups that have something to
// send again (new events, room in their lane). It holds no goroutine per
// Group: a Group waiting for events is a callback registered with the
// Backend (ChangeNotifier) or, for a Backend without one, a goroutine
// waiting on its Changed channel.
type delivery struct {
	mu     sync.Mutex
	starts []streamStart
	ready  []string // Groups to step, in round-robin order
	queued map[string]bool
	wake   chan struct{} // capacity 1
}

type streamStart struct {
	sub subscription
	gen uint64
}

func newDelivery() *delivery {
	return &delivery{queued: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// start hands the loop a new or restarted subscription.
func (d *delivery) start(sub subscription, gen uint64) {
	d.mu.Lock()
	d.starts = append(d.starts, streamStart{sub, gen})
	d.readyLocked(sub.groupID)
	d.mu.Unlock()
}

// fire makes a Group ready to step; safe from any goroutine, never blocks.
func (d *delivery) fire(groupID string) {
	d.mu.Lock()
	d.readyLocked(groupID)
	d.mu.Unlock()
}

func (d *delivery) readyLocked(groupID string) {
	if !d.queued[groupID] {
		d.queued[groupID] = true
		d.ready = append(d.ready, groupID)
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// next takes the started subscriptions and the next ready Group.
func (d *delivery) next() (starts []streamStart, groupID string, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	starts, d.starts = d.starts, nil
	if len(d.ready) == 0 {
		return starts, "", false
	}
	groupID, d.ready = d.ready[0], d.ready[1:]
	delete(d.queued, groupID)
	return starts, groupID, true
}

// streamState is one Group's stream as the delivery loop keeps it between
// steps: its position, the batch it fetched and has not queued yet (its
// lane was full), and the wait it is registered for.
type streamState struct {
	sub        subscription
	gen        uint64
	f          filter
	after      uint64
	live       bool
	held       []StoredEvent
	short      bool // held came back shorter than a batch: replay is over after it
	paused     bool // the lane was full at the last push
	archived   bool // a group.archived went by: the log may be closed (Closer)
	lastNotice time.Time
	stop       func() // cancels the pending wait; nil when none
}

func (st *streamState) cancelWait() {
	if st.stop != nil {
		st.stop()
		st.stop = nil
	}
}

// deliver is the connection's one delivery loop: it feeds every Group's
// lane, a Group at a time, in the order they became ready. A step fetches
// one batch (replay after sub.after, then live events once Backend.Changed
// reports them) and queues as much of it as the lane takes. When the lane
// is full it stops at the current event, tells the client with
// BACKPRESSURE, and the Group is stepped again once the writer has drained
// the lane to half, continuing with that same event: nothing is lost or
// sent twice, and other Groups keep flowing meanwhile.
//
// Replay ends the first time a batch comes back short; events after that
// point are live and pass through the filter. Filtered-out events are
// skipped silently, so a filtering client sees gaps in the Group sequence;
// its cursor and ACKs still refer to that sequence.
func (c *conn) deliver(ctx context.Context) {
	streams := map[string]*streamState{}
	defer func() {
		for _, st := range streams {
			st.cancelWait()
		}
	}()
	for {
		starts, g, ok := c.dlv.next()
		for _, s := range starts {
			if old := streams[s.sub.groupID]; old != nil {
				old.cancelWait()
			}
			streams[s.sub.groupID] = &streamState{sub: s.sub, gen: s.gen, f: newFilter(s.sub.filter), after: s.sub.after}
		}
		if !ok {
			select {
			case <-c.dlv.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		st := streams[g]
		if st == nil {
			continue // a wake for a stream that ended
		}
		if !c.step(ctx, st) {
			st.cancelWait()
			delete(streams, g)
			c.out.remove(g, st.gen) // unless a new SUBSCRIBE restarted it
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// step runs one turn of a Group's stream; false when the stream ends.
func (c *conn) step(ctx context.Context, st *streamState) bool {
	g := st.sub.groupID
	st.cancelWait()
	if len(st.held) == 0 {
		evs, err := c.b.Events(g, st.after, c.opts.ReplayBatch)
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			c.streamError(ctx, st.sub, st.gen, err)
			return false
		}
		st.held, st.short = evs, len(evs) < c.opts.ReplayBatch
	}
	for len(st.held) > 0 {
		ev := &st.held[0]
		switch {
		case ev.Sequence <= st.after:
			// never resend; the Backend promised ascending order
		case st.live && !st.f.match(ev):
			st.after = ev.Sequence
		default:
			r, space := c.enqueueEvent(ctx, st, ev)
			switch r {
			case laneStale:
				return false
			case laneFull:
				st.stop = c.waitOn(ctx, g, space)
				return true
			}
			st.after = ev.Sequence
		}
		st.archived = st.archived || ev.Type == protocol.EvtGroupArchived
		st.held = st.held[1:]
	}
	st.held = nil
	if !st.short {
		c.dlv.fire(g) // the next batch, after the Groups already waiting
		return true
	}
	// Asked when replay ends and after a group.archived went by, not at
	// every live step (Closed may take the Group's lock).
	if cl, ok := c.b.(Closer); ok && (!st.live || st.archived) {
		if last, ok := cl.Closed(g); ok && st.after >= last {
			return false // everything sent: nothing more will ever come
		}
	}
	st.live = true
	if n, ok := c.b.(ChangeNotifier); ok {
		st.stop = n.OnChange(g, st.after, func() { c.dlv.fire(g) })
	} else {
		st.stop = c.waitOn(ctx, g, c.b.Changed(g, st.after))
	}
	return true
}

// waitOn fires g once ch is closed, unless the returned stop runs first.
// It is the one goroutine a waiting Group costs, for lane room and for a
// Backend that is no ChangeNotifier.
func (c *conn) waitOn(ctx context.Context, g string, ch <-chan struct{}) func() {
	done := make(chan struct{})
	c.wg.Go(func() {
		select {
		case <-ch:
			c.dlv.fire(g)
		case <-done:
		case <-ctx.Done():
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// enqueueEvent offers one EVENT frame to the Group's lane. On a full lane
// the pause is announced with BACKPRESSURE unless one went out less than
// RetryAfter ago (Backend clock): the client already knows the Group is
// slowed down; laneFull comes with the channel closed when there is room.
// laneStale means the stream must stop.
func (c *conn) enqueueEvent(ctx context.Context, st *streamState, ev *StoredEvent) (pushResult, <-chan struct{}) {
	if c.sess.replaced() {
		return laneStale, nil // checked here, not only by the watcher: nothing decided after the replacement goes out
	}
	g := st.sub.groupID
	frame := appendEventFrame(make([]byte, 0, len(ev.Raw)+64), c.ids.next(), ev.Raw)
	r, space := c.out.pushGroup(g, st.gen, frame)
	if r != laneFull {
		st.paused = false
		return r, nil
	}
	if !st.paused {
		st.paused = true
		if now := c.b.Now(); st.lastNotice.IsZero() || now.Sub(st.lastNotice) >= c.opts.RetryAfter {
			st.lastNotice = now
			bp, err := encodeBackpressure(c.ids.next(), g, c.opts.RetryAfter)
			if err != nil || !c.out.pushControlFor(ctx, g, st.gen, bp) {
				return laneStale, nil
			}
		}
		if c.opts.OnBackpressure != nil {
			c.opts.OnBackpressure(g)
		}
		if c.hooks.paused != nil {
			c.hooks.paused(g)
		}
	}
	return laneFull, space
}

// streamError ends a Group's stream with an ERROR naming the Group:
// CURSOR_TOO_OLD keeps the Backend's details (the snapshot reference).
func (c *conn) streamError(ctx context.Context, sub subscription, gen uint64, err error) {
	if protocol.CodeOf(err) == protocol.CodeInternalError {
		c.log.Error("wss: backend events failed", "group", sub.groupID, "err", err)
	}
	e := withDetail(WireError(err, sub.frameID, ""), "groupId", sub.groupID)
	c.out.pushControlFor(ctx, sub.groupID, gen, encodeError(c.ids.next(), e))
}
