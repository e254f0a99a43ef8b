package wss

import (
	"github.com/missionweave/mwp-worker/protocol"
)

// Heads is what a Backend may add so the server refuses a client position
// past a Group's log: a SUBSCRIBE whose afterSequence, or an ACK whose
// cursor, names a sequence the authority never issued. A client holds
// such a position only when the authority lost history it had sent (its
// data restored from an older copy), so its own copy of the Group no longer
// matches the log (docs/wire.md "Frames", ERROR ahead_of_log).
type Heads interface {
	// Head is the Group's highest sequence the Backend has decided: at or
	// above every event it ever sent. ok is false for a Group it does not
	// hold.
	Head(groupID string) (last uint64, ok bool)
}

// ReasonAheadOfLog is details.reason of the PROTOCOL_VIOLATION that refuses
// a position past the Group's log.
const ReasonAheadOfLog = "ahead_of_log"

// aheadOfLog returns the refusal of position seq in groupID when it is past
// the Group's log, else nil. The caller has authorized the peer for the
// Group: the answer names its last sequence.
func (s *session) aheadOfLog(groupID string, seq uint64) *protocol.Error {
	h, ok := s.b.(Heads)
	if !ok {
		return nil
	}
	last, ok := h.Head(groupID)
	if !ok || seq <= last {
		return nil
	}
	return AheadOfLog(groupID, seq, last)
}

// AheadOfLog is the refusal of position seq in groupID, whose log ends at
// last before it; the HTTPS events route answers it too.
func AheadOfLog(groupID string, seq, last uint64) *protocol.Error {
	e := protocol.Errorf(protocol.CodeProtocolViolation,
		"group %s: position %d is past the authority's log, which ends at %d: this log is not the history the client followed (the authority was restored from an older copy?); resync the Group",
		groupID, seq, last)
	return protocol.WithDetails(e, "groupId", groupID, "reason", ReasonAheadOfLog, "sequence", seq, "lastSequence", last)
}
