package authoritylite

import "github.com/missionweave/mwp-worker/authority-lite/wss"

var _ wss.Heads = (*Service)(nil)

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
