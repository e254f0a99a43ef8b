package client

import "time"

// A turn commits everything ready when the loop wakes, and what arrives
// while it commits waits for the next one. Under load the next turn then
// often holds a part of what the last one served: the Commands the
// runtime hands in reply to the events just applied, or the events of the
// authority's next transaction, each paying a commit of its own. So a
// turn holding less than half of what the last commit served waits, for
// at most half the average commit time, until it holds that half (the
// authority's writer gathers the same way, for all of it). A lone item
// does not wait for more: its turns serve one thing or two each.
//
// A receipt also names the events its Command caused, and the authority
// sends them right after it: a turn answering a Command whose events are
// still on their way waits for them the same way, so the answer and its
// events share a commit instead of taking one each.
type gathering struct {
	seen    int           // served around the last commit: its turn and what arrived meanwhile
	took    time.Duration // moving average of the turns' commits
	timer   *time.Timer
	expired bool
}

// holdTurn says whether the loop keeps gathering instead of committing
// the turn now.
func (s *session) holdTurn() bool {
	g := &s.gather
	n := s.t.size()
	if n == 0 || g.expired || g.took <= 0 || len(s.t.events) >= s.c.cfg.MaxBatch || (2*n >= g.seen && !s.eventsComing()) {
		g.stop()
		return false
	}
	if g.timer == nil {
		g.timer = time.NewTimer(g.took / 2)
	}
	return true
}

// eventsComing says whether an answer of the turn names an event of a
// subscribed Group that is neither durable nor in the turn.
func (s *session) eventsComing() bool {
	for _, a := range s.t.answers {
		if a.r.receipt == nil {
			continue
		}
		for _, ref := range a.r.receipt.Events {
			if ref.GroupID == "" || ref.Sequence == nil || !s.subscribed[ref.GroupID] ||
				*ref.Sequence <= s.c.cfg.Store.Cursor(ref.GroupID) || s.t.holds(ref.GroupID, *ref.Sequence) {
				continue
			}
			return true
		}
	}
	return false
}

// c is the channel the loop waits on, nil while no hold runs.
func (g *gathering) c() <-chan time.Time {
	if g.timer == nil {
		return nil
	}
	return g.timer.C
}

func (g *gathering) stop() {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.expired = false
}

// committed notes a turn of n things whose commit took took, with waiting
// what arrived meanwhile.
func (g *gathering) committed(n, waiting int, took time.Duration) {
	g.took += (took - g.took) / 4
	g.seen = n + waiting
}
