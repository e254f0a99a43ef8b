package runtime

import (
	"time"

	"github.com/missionweave/mwp-worker/queue"
)

// What the worker has seen of its own runs, for the estimates it discloses
// (spec 11.2) and admits on (spec 10.3): how long a capability's runs take
// and how long a picked item takes to be running. In memory: a restart
// starts again from the configured Estimate.

// runStats is the history of one capability's completed runs.
type runStats struct {
	n    int
	mean time.Duration
}

func (r *runStats) add(d time.Duration) {
	r.n++
	r.mean += (d - r.mean) / time.Duration(r.n)
}

// estimateOf is an item's expected run time and how many observed runs it
// rests on: the longest mean of its capabilities, or the configured
// Estimate (resting on none) while one of them has no completed run.
func (e *engine) estimateOf(en queue.Entry) (time.Duration, int) {
	var est time.Duration
	runs := 0
	for i, c := range en.Capabilities {
		r := e.runs[c.ID]
		if r.n == 0 {
			return e.cfg.Estimate, 0
		}
		est = max(est, r.mean)
		if i == 0 || r.n < runs {
			runs = r.n
		}
	}
	if runs == 0 {
		return e.cfg.Estimate, 0
	}
	return est, runs
}

// observeRun records a completed run's duration for the item's
// capabilities; the waiting items' estimates follow (a material change of
// their disclosure is posted as usual).
func (e *engine) observeRun(it *item, now time.Time) {
	en, ok := e.store.Item(it.key.group, it.key.id)
	if !ok || it.startedAt.IsZero() {
		return
	}
	d := now.Sub(it.startedAt)
	for _, c := range en.Capabilities {
		r := e.runs[c.ID]
		r.add(d)
		e.runs[c.ID] = r
	}
	for _, x := range e.items {
		if x.inSched && (x.phase == phQueued || x.phase == phAccepting) {
			if xe, ok := e.store.Item(x.key.group, x.key.id); ok {
				e.enqueue(x, xe, now)
			}
		}
	}
}

// observeStart records how long a pick took to get its lease: the start
// latency of every disclosed start window.
func (e *engine) observeStart(it *item, now time.Time) {
	if it.pickedAt.IsZero() {
		return
	}
	e.starts.add(now.Sub(it.pickedAt))
	e.sched.SetStartLatency(e.starts.mean)
}
