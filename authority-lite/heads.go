package authoritylite

import "github.com/missionweave/mwp-worker/authority-lite/wss"

var (
	_ wss.Heads  = (*Service)(nil)
	_ wss.Closer = (*Service)(nil)
)

// Head is the Group's highest decided sequence (wss.Heads): the binding
// refuses a SUBSCRIBE or ACK past it, which only a client that followed
// history this log no longer holds can send (an authority restored from an
// older copy). Decided, not durable: a client never holds an event before
// it is durable, so a position between the two is never refused wrongly.
func (s *Service) Head(groupID string) (uint64, bool) {
	if s.peekGroup(groupID) == nil { // an archived Group's stub knows its head
		return 0, false
	}
	return s.DecidedSequence(groupID), true
}

// Closed reports an archived Group's last sequence (wss.Closer): it takes
// no more commands, so a stream that sent group.archived has sent all,
// and ends instead of waiting on the Group for as long as its connection
// lasts.
func (s *Service) Closed(groupID string) (uint64, bool) {
	gs := s.peekGroup(groupID)
	if gs == nil {
		return 0, false
	}
	gs.mu.Lock()
	archived, last := gs.archived, gs.last
	gs.mu.Unlock()
	// Archived is decided before group.archived is durable: closed only
	// once it is, or a stream would end one event short.
	if !archived || gs.tail.last.Load() < last {
		return 0, false
	}
	return last, true
}
