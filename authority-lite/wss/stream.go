package wss

import (
	"context"
	"slices"
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

// stream feeds one Group's lane: replay in batches after sub.after, then
// live events as Backend.Changed reports them. It holds at most one batch:
// when the lane is full it stops at the current event, tells the client
// with BACKPRESSURE, waits for the writer to drain the lane to half and
// continues with that same event: nothing is lost or sent twice.
//
// Replay ends the first time a batch comes back short; events after that
// point are live and pass through the filter. Filtered-out events are
// skipped silently, so a filtering client sees gaps in the Group sequence;
// its cursor and ACKs still refer to that sequence.
func (c *conn) stream(ctx context.Context, sub subscription, gen uint64) {
	g, after, live := sub.groupID, sub.after, false
	f := newFilter(sub.filter)
	batch := c.opts.ReplayBatch
	var lastNotice time.Time // last BACKPRESSURE of this stream
	for {
		evs, err := c.b.Events(g, after, batch)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.streamError(ctx, sub, gen, err)
			return
		}
		for i := range evs {
			ev := &evs[i]
			if ev.Sequence <= after {
				continue // never resend; the Backend promised ascending order
			}
			if live && !f.match(ev) {
				after = ev.Sequence
				continue
			}
			if !c.enqueueEvent(ctx, g, gen, ev, &lastNotice) {
				return
			}
			after = ev.Sequence
		}
		if len(evs) < batch {
			live = true
			select {
			case <-c.b.Changed(g, after):
			case <-ctx.Done():
				return
			}
		}
	}
}

// enqueueEvent queues one EVENT frame, pausing the stream while the lane is
// full. A pause is announced with BACKPRESSURE unless one went out less
// than RetryAfter ago (Backend clock): the client already knows the Group
// is slowed down. It returns false when the stream must stop.
func (c *conn) enqueueEvent(ctx context.Context, g string, gen uint64, ev *StoredEvent, lastNotice *time.Time) bool {
	frame := appendEventFrame(make([]byte, 0, len(ev.Raw)+64), c.ids.next(), ev.Raw)
	paused := false
	for {
		if c.sess.replaced() {
			return false // checked here, not only by the watcher: nothing decided after the replacement goes out
		}
		r, space := c.out.pushGroup(g, gen, frame)
		switch r {
		case pushed:
			return true
		case laneStale:
			return false
		}
		if !paused {
			paused = true
			if now := c.b.Now(); lastNotice.IsZero() || now.Sub(*lastNotice) >= c.opts.RetryAfter {
				*lastNotice = now
				bp, err := encodeBackpressure(c.ids.next(), g, c.opts.RetryAfter)
				if err != nil || !c.out.pushControlFor(ctx, g, gen, bp) {
					return false
				}
			}
			if c.opts.OnBackpressure != nil {
				c.opts.OnBackpressure(g)
			}
			if c.hooks.paused != nil {
				c.hooks.paused(g)
			}
		}
		select {
		case <-space:
		case <-ctx.Done():
			return false
		}
	}
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
