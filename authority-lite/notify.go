package authoritylite

import (
	"sync"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
)

// changeWaiter is one wss.ChangeNotifier callback waiting for a Group's
// next append.
type changeWaiter struct {
	once sync.Once
	fn   func()
}

func (w *changeWaiter) fire() { w.once.Do(w.fn) }

// OnChange calls fn once the Group's log passes after (at once if it
// already has), unless the returned cancel runs first: wss.ChangeNotifier,
// so a connection waits for every Group it streams without a goroutine
// each. An unknown Group never fires, as Changed never closes for it.
func (s *Service) OnChange(groupID string, after uint64, fn func()) func() {
	gs := s.peekGroup(groupID) // an archived Group's stub is enough
	if gs == nil {
		return func() {}
	}
	w := &changeWaiter{fn: fn}
	gs.nmu.Lock()
	if gs.waiters == nil {
		gs.waiters = map[*changeWaiter]struct{}{}
	}
	gs.waiters[w] = struct{}{}
	gs.nmu.Unlock()
	cancel := func() {
		gs.nmu.Lock()
		delete(gs.waiters, w)
		gs.nmu.Unlock()
	}
	// Registered before the check, as Changed takes its channel first: an
	// append between the two fires w either way.
	if s.LastSequence(groupID) > after {
		cancel()
		w.fire()
	}
	return cancel
}

// takeWaiters empties the Group's waiters; nmu must be held.
func (gs *groupState) takeWaitersLocked() map[*changeWaiter]struct{} {
	ws := gs.waiters
	gs.waiters = nil
	return ws
}

var _ wss.ChangeNotifier = (*Service)(nil)
