package poc

import (
	"context"
	"sync"

	"github.com/missionweave/mwp-worker/slots"
)

// Holds are points in the PoC handlers where a run waits for the driver, so
// that a fault's moment is made instead of waited for: both slots of
// worker-1 held by the testing stages when the critical item arrives, a
// run held before its first checkpoint while its worker is cut off past
// its lease. A hold is armed for one agent, Group, WorkItem and point;
// every run that reaches it waits until the driver releases it, the worker
// asks the run to yield (a preemption, a lost lease, a shutdown) or the
// run's context ends. A run then carries on as it would have: at a safe
// point it yields when asked to, so a held run is never stuck in its slot.
type Holds struct {
	mu    sync.Mutex
	holds map[holdKey]*Hold
	// moved is signalled (without blocking) whenever a run starts or stops
	// waiting at a hold, so the driver does not poll for the moment.
	moved chan struct{}
}

// HoldPoint says where in a run a hold applies.
type HoldPoint string

// The hold points of the PoC handlers.
const (
	// HoldAtStart: before the run's first step, so before any checkpoint
	// of a fresh item.
	HoldAtStart HoldPoint = "start"
	// HoldAtSafePoint: at the run's first safe point, after a checkpoint,
	// where a preemption request makes it yield.
	HoldAtSafePoint HoldPoint = "safe-point"
)

type holdKey struct {
	agent, group, item string
	at                 HoldPoint
}

// Hold is one armed hold.
type Hold struct {
	released chan struct{}
	once     sync.Once

	mu      sync.Mutex
	waiting int
	reached int
}

// NewHolds returns an empty set of holds.
func NewHolds() *Holds {
	return &Holds{holds: map[holdKey]*Hold{}, moved: make(chan struct{}, 1)}
}

// Arm places a hold for agent's runs of item in group at point; arming the
// same place again returns the same hold.
func (h *Holds) Arm(agent, group, item string, at HoldPoint) *Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := holdKey{agent, group, item, at}
	if x := h.holds[k]; x != nil {
		return x
	}
	x := &Hold{released: make(chan struct{})}
	h.holds[k] = x
	return x
}

// Moved is signalled when a run starts or stops waiting at any hold.
func (h *Holds) Moved() <-chan struct{} { return h.moved }

// ReleaseAll releases every hold (the run is ending).
func (h *Holds) ReleaseAll() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.holds {
		x.Release()
	}
}

func (h *Holds) notify() {
	select {
	case h.moved <- struct{}{}:
	default:
	}
}

// Release lets every run waiting at the hold go on; later runs pass.
func (x *Hold) Release() { x.once.Do(func() { close(x.released) }) }

// Released reports whether the hold was released.
func (x *Hold) Released() bool {
	select {
	case <-x.released:
		return true
	default:
		return false
	}
}

// Holding reports whether a run waits at the hold now.
func (x *Hold) Holding() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.waiting > 0
}

// Reached counts the runs that came to the hold while it was armed.
func (x *Hold) Reached() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.reached
}

// wait blocks a run of w at point while a matching hold is armed and not
// released, until the worker asks the run to yield or ctx ends.
func (h *Holds) wait(ctx context.Context, agent string, w *slots.Work, at HoldPoint) {
	if h == nil {
		return
	}
	s := w.Slot()
	h.mu.Lock()
	x := h.holds[holdKey{agent, s.GroupID, s.WorkItemID, at}]
	h.mu.Unlock()
	if x == nil || x.Released() {
		return
	}
	x.mu.Lock()
	x.waiting++
	x.reached++
	x.mu.Unlock()
	h.notify()
	select {
	case <-x.released:
	case <-w.PreemptRequested():
	case <-ctx.Done():
	}
	x.mu.Lock()
	x.waiting--
	x.mu.Unlock()
	h.notify()
}
