package queue

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// ContextPackage returns the Context Package a run of the WorkItem gets
// (spec 13.3): the newest one scoped to the WorkItem, else the newest
// Mission-wide one of its Group; false when there is none, or when it lies
// at or below a restored snapshot (the inbox no longer holds it). The
// package comes from the signed event the authority accepted it in.
func (s *Store) ContextPackage(groupID, workItemID string) (protocol.ContextPackage, bool, error) {
	s.mu.RLock()
	g := s.groups[groupID]
	var seq, base uint64
	if g != nil {
		base = g.base
		if e := g.items[workItemID]; e != nil {
			seq = e.ContextSeq
		}
		if seq == 0 {
			seq = g.mis.ContextSeq
		}
	}
	s.mu.RUnlock()
	if seq == 0 || seq <= base {
		return protocol.ContextPackage{}, false, nil
	}
	raws, err := s.inboxRange(groupID, seq, seq, 1)
	if err != nil {
		return protocol.ContextPackage{}, false, err
	}
	if len(raws) != 1 {
		return protocol.ContextPackage{}, false, fmt.Errorf("queue: group %s inbox lacks event %d", groupID, seq)
	}
	var ev protocol.Event
	if err := json.Unmarshal(raws[0], &ev); err != nil {
		return protocol.ContextPackage{}, false, err
	}
	p, err := group.DecodeAs[group.ContextPublished](&ev)
	if err != nil {
		return protocol.ContextPackage{}, false, err
	}
	return p.Package, true, nil
}

// CitedEvents returns, as the authority signed them, up to max events of
// the range r that a context package cites, starting at r.FromSequence.
// Only an active member of the range's Group may read them (spec 13.3: as
// its Membership allows): for anyone else, and for a Group this store
// does not hold, it is MEMBERSHIP_REQUIRED alike. Events at or below a
// restored snapshot are gone from the inbox (CURSOR_TOO_OLD); events past
// the cursor are not applied yet and are left out.
func (s *Store) CitedEvents(agentID string, r protocol.EventRange, max int) ([]json.RawMessage, error) {
	s.mu.RLock()
	g := s.groups[r.GroupID]
	var member Member
	var base, cursor uint64
	if g != nil {
		member = g.members[memberKey(protocol.Actor{Kind: protocol.ActorAgent, ID: agentID})]
		base, cursor = g.base, g.cursor
	}
	s.mu.RUnlock()
	if g == nil || !member.Active() {
		return nil, protocol.Errorf(protocol.CodeMembershipRequired, "agent %s may not read the events of group %s", agentID, r.GroupID).At("/groupId")
	}
	if err := r.Check(); err != nil {
		return nil, err
	}
	if r.FromSequence <= base {
		e := protocol.Errorf(protocol.CodeCursorTooOld, "group %s keeps events after %d (a restored snapshot); %d is gone", r.GroupID, base, r.FromSequence).At("/fromSequence")
		return nil, protocol.WithDetails(e, "oldestSequence", base+1)
	}
	to := min(r.ToSequence, cursor)
	if r.FromSequence > to || max <= 0 {
		return []json.RawMessage{}, nil
	}
	return s.inboxRange(r.GroupID, r.FromSequence, to, max)
}

// inboxRange reads the stored bytes of sequences from…to, at most max.
func (s *Store) inboxRange(groupID string, from, to uint64, max int) ([]json.RawMessage, error) {
	out := []json.RawMessage{}
	err := s.view(func(tx *bolt.Tx) error {
		gb := tx.Bucket(bktGroups).Bucket([]byte(groupID))
		if gb == nil {
			return fmt.Errorf("queue: unknown group %s", groupID)
		}
		c := gb.Bucket(bktInbox).Cursor()
		for k, v := c.Seek(u64(from)); k != nil && getU64(k) <= to && len(out) < max; k, v = c.Next() {
			out = append(out, json.RawMessage(append([]byte(nil), v...)))
		}
		return nil
	})
	return out, err
}
