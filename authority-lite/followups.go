package authoritylite

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// A follow-up is what an accepted decision owes another Group: a child
// Mission's Group to create, or a child's outcome to deliver to its parent
// WorkItem. It is written in the transaction of the events that owe it and
// deleted in the transaction that carries it out, so a crash in between
// leaves it pending and Open carries it out: exactly once, never lost.
//
//	followups   owing groupId 0 sequence of its last event (8 bytes BE) index (2 bytes BE) -> followUp JSON
type followUp struct {
	Child         *group.LinkedMission `json:"child,omitempty"`
	Notice        *group.ParentNotice  `json:"notice,omitempty"`
	ActionID      string               `json:"actionId"`
	CorrelationID string               `json:"correlationId,omitempty"`
}

var bucketFollowUps = []byte("followups")

func followUpKey(groupID string, seq uint64, i int) []byte {
	k := make([]byte, 0, len(groupID)+11)
	k = append(k, groupID...)
	k = append(k, 0)
	k = append(k, seqKey(seq)...)
	return append(k, byte(i>>8), byte(i))
}

// owed is one follow-up of a pending decision and its key once sealed.
type owed struct {
	key []byte
	fu  followUp
}

// followUps lists what p owes other Groups, keyed after its last event.
func followUps(c *call, groupID string, lastSeq uint64, p *pending) ([]owed, error) {
	n := len(p.children) + len(p.notices)
	if n == 0 {
		return nil, nil
	}
	if n > 1<<16 {
		return nil, fmt.Errorf("%d follow-ups in one decision", n)
	}
	out := make([]owed, 0, n)
	add := func(fu followUp) {
		fu.ActionID, fu.CorrelationID = c.cmd.ActionID, c.cmd.CorrelationID
		out = append(out, owed{key: followUpKey(groupID, lastSeq, len(out)), fu: fu})
	}
	for _, ch := range p.children {
		link := ch.Link
		add(followUp{Child: &link})
	}
	for _, n := range p.notices {
		notice := n
		add(followUp{Notice: &notice})
	}
	return out, nil
}

func putFollowUps(tx logstore.Tx, owed []owed) error {
	if len(owed) == 0 {
		return nil
	}
	b := tx.Bucket(bucketFollowUps)
	for _, o := range owed {
		raw, err := json.Marshal(o.fu)
		if err != nil {
			return err
		}
		if err := b.Put(o.key, raw); err != nil {
			return err
		}
	}
	return nil
}

// followEffects carries out what an accepted decision owes other Groups.
// One that fails by a write stays pending for the next Open; one the
// receiving Group refuses is dropped, loudly.
func (s *Service) followEffects(c *call, p *pending) {
	if s.holdFollowUps {
		return
	}
	for _, o := range p.owed {
		s.carryOut(o, c.now)
	}
}

// resumeFollowUps carries out the follow-ups a crash left pending.
func (s *Service) resumeFollowUps() error {
	var pending []owed
	err := s.db.View(func(tx logstore.Tx) error {
		return tx.Bucket(bucketFollowUps).ForEach(func(k, v []byte) error {
			var fu followUp
			if err := json.Unmarshal(v, &fu); err != nil {
				return fmt.Errorf("authority store: follow-up %q: %w", k, err)
			}
			pending = append(pending, owed{key: append([]byte(nil), k...), fu: fu})
			return nil
		})
	})
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		s.log.Warn("carrying out follow-ups left pending by a crash", "count", len(pending))
	}
	for _, o := range pending {
		s.carryOut(o, s.clock.Now())
	}
	return nil
}

func (s *Service) carryOut(o owed, now time.Time) {
	var err error
	switch {
	case o.fu.Child != nil:
		err = s.createChild(o, now)
	case o.fu.Notice != nil:
		err = s.deliverNotice(o, now)
	default:
		err = protocol.InvalidCommand("empty follow-up")
	}
	if err == nil {
		return
	}
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code != protocol.CodeInternalError {
		// Refused by the receiving Group's rules: retrying cannot change that.
		s.log.Error("follow-up refused; dropped", "key", fmt.Sprintf("%q", o.key), "child", o.fu.Child != nil, "err", err)
		if derr := s.db.Update(func(tx logstore.Tx) error { return tx.Bucket(bucketFollowUps).Delete(o.key) }); derr != nil {
			s.log.Error("follow-up not dropped", "err", derr)
		}
		return
	}
	s.log.Error("follow-up not carried out; retried at the next open", "key", fmt.Sprintf("%q", o.key), "err", err)
}

func (s *Service) createChild(o owed, now time.Time) error {
	link := *o.fu.Child
	s.orgMu.Lock()
	defer s.orgMu.Unlock()
	if s.peekGroup(link.GroupID) != nil || s.Purged(link.GroupID) {
		return protocol.InvalidTransition("group %s already exists", link.GroupID)
	}
	gs := newGroupState(link.GroupID, s.cfg.Limits)
	out, err := gs.g.CreateLinkedMission(link, now)
	if err != nil {
		return err
	}
	p := pending{now: protocol.NewTime(now), drafts: out.Events, settles: [][]byte{o.key}}
	ensureMember(gs, link.Owner, protocol.RoleMissionOwner, link.Actor, &p)
	if link.Actor.Kind == protocol.ActorAgent {
		ensureMember(gs, link.Actor, protocol.RoleCoordinator, link.Actor, &p)
	}
	sub := &call{s: s, cmd: &protocol.Command{ActionID: o.fu.ActionID, Actor: link.Actor, CorrelationID: o.fu.CorrelationID}, now: now}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if _, err := s.commitAutomatic(sub, gs, &p); err != nil {
		return err
	}
	s.mu.Lock()
	s.groups[gs.id] = gs
	s.mu.Unlock()
	return nil
}

func (s *Service) deliverNotice(o owed, now time.Time) error {
	n := o.fu.Notice
	gs := s.group(n.ParentGroupID)
	if gs == nil {
		return protocol.Errorf(protocol.CodeGroupNotFound, "parent group %s not found", n.ParentGroupID)
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	out, err := gs.g.ApplyChildOutcome(n.Outcome, now)
	if err != nil {
		return err
	}
	sub := &call{s: s, cmd: &protocol.Command{ActionID: o.fu.ActionID, Actor: group.AuthorityActor, CorrelationID: o.fu.CorrelationID}, now: now}
	pp := pending{now: protocol.NewTime(now), drafts: out.Events, settles: [][]byte{o.key}}
	_, err = s.commitAutomatic(sub, gs, &pp)
	return err
}
