package runtime

import "github.com/missionweave/mwp-worker/queue"

// A diverged Group (queue.Divergence: the authority's log is not the
// history this worker followed, docs/operations.md "A Group diverged") is
// not acted on until the operator resyncs it: no offer of it is judged or
// accepted and no item of it starts, because the worker's view of it may
// hold work the authority never had. Runs already going keep their leases
// until the authority fences them (renewals it refuses end them).

// onDiverged drops the waiting items of a Group that just diverged.
func (e *engine) onDiverged(d queue.Divergence) {
	for _, it := range e.items {
		if it.key.group == d.GroupID && it.Phase != phRunning && it.Phase != phFinishing {
			e.drop(it)
		}
	}
}

// diverged reports whether the store holds a Group as diverged.
func (e *engine) diverged(group string) bool {
	_, ok := e.store.Divergence(group)
	return ok
}
