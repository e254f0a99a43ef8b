package client

import (
	"encoding/json"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// Divergence on the wire (docs/operations.md "A Group diverged"). An
// authority restored from an older copy has a log that is not the one the
// worker followed: it ends before the worker's cursor, or it issued other
// events under sequences the worker applied. Subscribing after the cursor
// alone would never show either: the worker would wait for sequences the
// authority reuses, then apply them on top of its old history. So every
// SUBSCRIBE starts below the cursor (Store.ReplayAfter): the authority sends
// the newest applied events again and the store compares each with its
// stored bytes (another document is a divergence). And when it starts below
// the cursor, an ACK of the cursor follows at once: an authority whose log
// ends before it answers PROTOCOL_VIOLATION ahead_of_log (docs/wire.md), as
// it does for a SUBSCRIBE past its log. Either way the Group is recorded as
// diverged in the store, applies nothing more, and is not subscribed again
// until the operator resyncs it.

// overlapSub is a Group's last SUBSCRIBE that asked for applied events
// again.
type overlapSub struct {
	frameID string
	after   uint64
}

// subscribe (re)subscribes a Group from the store's ReplayAfter and, when
// that is below the cursor, reports the cursor with an ACK (see above).
func (s *session) subscribe(group string) error {
	cursor := s.c.cfg.Store.Cursor(group)
	after := min(s.c.cfg.Store.ReplayAfter(group), cursor)
	if err := s.subscribeOverlap(group, after, cursor); err != nil || after == cursor {
		return err
	}
	return s.ack([]protocol.Cursor{{GroupID: group, Sequence: cursor}})
}

// subscribeOverlap subscribes a Group after a position at or below its
// cursor, remembering a position below it.
func (s *session) subscribeOverlap(group string, after, cursor uint64) error {
	fid, err := s.sendSubscribe(group, after)
	if err != nil || after >= cursor {
		delete(s.overlaps, group)
		return err
	}
	s.overlaps[group] = overlapSub{frameID: fid, after: after}
	return nil
}

// overlapTooOld handles CURSOR_TOO_OLD answering a SUBSCRIBE below the
// cursor, and reports whether e was one: the authority no longer holds the
// whole overlap online (its log was compacted), which says nothing about
// the cursor itself. The Group is subscribed again from the authority's
// first online event when it names one below the cursor (details.
// firstSequence, ours: what is still online is compared), else from the
// cursor, without the comparison; a CURSOR_TOO_OLD for that SUBSCRIBE is
// the real thing (a snapshot to restore).
func (s *session) overlapTooOld(group, frameID string, e *protocol.Error) (bool, error) {
	o, ok := s.overlaps[group]
	if !ok || o.frameID != frameID || e.Code != protocol.CodeCursorTooOld {
		return false, nil
	}
	delete(s.overlaps, group)
	cursor := s.c.cfg.Store.Cursor(group)
	after := cursor
	if first, ok := uintDetail(e, "firstSequence"); ok && first > o.after+1 && first-1 < cursor {
		after = first - 1
	}
	s.c.log.Debug("the authority no longer holds the whole overlap online; subscribing again", "group", group, "after", after, "cursor", cursor)
	return true, s.subscribeOverlap(group, after, cursor)
}

// uintDetail reads a non-negative integer of an error's details.
func uintDetail(e *protocol.Error, key string) (uint64, bool) {
	var f float64
	switch v := e.Details[key].(type) {
	case float64:
		f = v
	case json.Number:
		var err error
		if f, err = v.Float64(); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if f < 0 || f != float64(uint64(f)) {
		return 0, false
	}
	return uint64(f), true
}

// aheadOfLog reads the authority's refusal of a position past its log
// (details.reason ahead_of_log): the Group and the log's last sequence.
func aheadOfLog(e *protocol.Error) (group string, last uint64, ok bool) {
	if e.Code != protocol.CodeProtocolViolation || e.Details["reason"] != "ahead_of_log" {
		return "", 0, false
	}
	group, _ = e.Details["groupId"].(string)
	last, ok = uintDetail(e, "lastSequence")
	if group == "" || !ok {
		return "", 0, false
	}
	return group, last, true
}

// onAhead records that the authority's log of a Group ends at last, before
// the store's cursor, and stops following the Group.
func (s *session) onAhead(group string, last uint64) error {
	if s.c.cfg.Store.Cursor(group) == 0 {
		// Nothing applied, nothing to contradict: not our position.
		s.c.log.Warn("the authority refused a position past its log of a Group this worker holds nothing of", "group", group, "lastSequence", last)
		return nil
	}
	d, isNew, err := s.c.cfg.Store.MarkAhead(group, last)
	if err != nil {
		return err
	}
	if !isNew {
		return nil // already diverged, or the cursor is not past last
	}
	s.logDiverged(d)
	if s.c.cfg.OnApplied != nil {
		s.c.cfg.OnApplied(queue.Result{Diverged: []queue.Divergence{d}})
	}
	return nil
}

// logDiverged says once that a Group diverged and stops following it: its
// gap is not replayed, and it is not subscribed again (Client.diverged).
// The stream already running on this connection ends with it; the store
// refuses its events meanwhile.
func (s *session) logDiverged(d queue.Divergence) {
	what := "the authority contradicts an event this worker applied"
	if d.AuthorityLastSequence != nil {
		what = "the authority's log ends before this worker's cursor"
	}
	s.c.log.Error("group diverged: "+what+"; nothing more of the group is applied until it is resynced (mwp-worker resync)",
		"group", d.GroupID, "sequence", d.Sequence, "detail", d.Describe(), "stored", d.StoredEventID, "received", d.ReceivedEventID)
	delete(s.subscribed, d.GroupID)
	delete(s.overlaps, d.GroupID)
	s.gaps.forget(d.GroupID)
}

// diverged reports whether the store holds a Group as diverged.
func (c *Client) diverged(group string) bool {
	_, ok := c.cfg.Store.Divergence(group)
	return ok
}
