package authoritylite

import (
	"context"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// recordUsage charges a WorkItem's budget and its Mission's; an overflow in
// either refuses the command with nothing recorded (BUDGET_EXCEEDED).
func (s *Service) recordUsage(c *call, gs *groupState, p *pending) error {
	w, err := group.CheckUsageRecord(gs.g, group.InputFromCommand(c.cmd, c.payload), c.now)
	if err != nil {
		return err
	}
	pl := c.payload.(*protocol.RecordResourceUsagePayload)
	session := uint64(0)
	if c.cmd.SessionEpoch != nil {
		session = *c.cmd.SessionEpoch
	}
	return s.charge(gs, w, c.cmd.Actor, pl.OwnershipEpoch, pl.LeaseID, pl.UsageDelta, session, session, p)
}

// charge adds delta to a WorkItem's usage after checking the contract's,
// the Mission's and the ancestors' budgets (group/budget.go), and drafts
// the usage event. It changes nothing on refusal.
func (s *Service) charge(gs *groupState, w *group.WorkItem, actor protocol.Actor, epoch uint64, leaseID string, delta protocol.Usage, historical, reconciling uint64, p *pending) error {
	used := gs.usage[w.WorkItemID].Add(delta)
	if err := group.CheckItemBudget(w, used); err != nil {
		return err
	}
	if m := gs.g.Mission; m != nil && m.Budgets != nil {
		if err := group.CheckMissionBudget(m, gs.subtreeUsage().Add(delta), false); err != nil {
			return err
		}
	}
	if err := s.chargeAncestors(gs, delta, p); err != nil {
		return err
	}
	d := group.UsageDraft(w, actor, epoch, leaseID, delta, used, historical, reconciling)
	if err := gs.g.FoldAll([]group.EventDraft{d}, p.now.Time); err != nil {
		return err
	}
	gs.usage[w.WorkItemID] = used
	p.drafts = append(p.drafts, d)
	return nil
}

// Usage returns what a WorkItem has been charged.
func (s *Service) Usage(groupID, workItemID string) protocol.Usage {
	gs := s.group(groupID)
	if gs == nil {
		return protocol.Usage{}
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.usage[workItemID]
}

// subtreeUsage is everything charged in this Group and in the Groups of
// its descendant Missions.
func (gs *groupState) subtreeUsage() protocol.Usage {
	total := gs.descendants
	for _, u := range gs.usage {
		total = total.Add(u)
	}
	return total
}

// ancestorCharge is a pending update of an ancestor Group's descendant
// usage; the ancestor stays locked until the charge is written or dropped.
type ancestorCharge struct {
	gs          *groupState
	descendants protocol.Usage
}

// chargeAncestors checks delta against the budget of every ancestor
// Mission (spec: budgets up the whole ancestry) and, when all fit, holds
// each ancestor locked with its new descendant usage in p until commit.
// Locks are taken child to parent; an ancestor busy under another order
// (a session replacement locking every Group) is retried briefly, then the
// command is refused as retryable.
func (s *Service) chargeAncestors(gs *groupState, delta protocol.Usage, p *pending) error {
	anc := gs.g.Ancestors
	for i := len(anc) - 1; i >= 0; i-- {
		ags := s.groupOfMission(anc[i])
		if ags == nil || ags == gs {
			continue
		}
		s.ensureLoaded(ags)
		if !lockSoon(&ags.mu) {
			s.releaseAncestors(p)
			return protocol.Errorf(protocol.CodeInternalError, "ancestor Group %s is busy; retry", ags.id)
		}
		p.ancestors = append(p.ancestors, &ancestorCharge{gs: ags, descendants: ags.descendants.Add(delta)})
		if err := group.CheckMissionBudget(ags.g.Mission, ags.subtreeUsage().Add(delta), true); err != nil {
			s.releaseAncestors(p)
			return err
		}
	}
	return nil
}

// releaseAncestors drops pending ancestor charges and their locks.
func (s *Service) releaseAncestors(p *pending) {
	for _, a := range p.ancestors {
		a.gs.mu.Unlock()
	}
	p.ancestors = nil
}

func (s *Service) groupOfMission(missionID string) *groupState {
	if s.unread.Load() > 0 {
		s.fillStubs(context.Background()) // a placeholder's Mission is not known before
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, gs := range s.groups {
		if gs.missionID == missionID {
			return gs
		}
	}
	return nil
}
