package group

import (
	"github.com/missionweave/mwp-worker/protocol"
)

// Event is an accepted event as Fold reads it: the envelope members that
// state depends on and the typed payload (a pointer to the type Events
// names for Type).
type Event struct {
	Type       protocol.EventType
	Aggregate  protocol.Aggregate
	Revision   uint64
	OccurredAt protocol.Time
	Payload    any
}

// At returns the draft as the event the authority accepts at now.
func (d EventDraft) At(now protocol.Time) Event {
	return Event{Type: d.Type, Aggregate: d.Aggregate, Revision: d.Revision, OccurredAt: now, Payload: d.Payload}
}

// FromWire returns a signed event's Fold input, decoding its payload.
func FromWire(ev *protocol.Event) (Event, error) {
	p, err := Decode(ev.Type, ev.Payload)
	if err != nil {
		return Event{}, err
	}
	out := Event{Type: ev.Type, Revision: ev.Rev(), OccurredAt: ev.OccurredAt, Payload: p}
	if ev.Aggregate != nil {
		out.Aggregate = *ev.Aggregate
	}
	return out, nil
}

// Fold applies one accepted event to the Group: the only way Mission,
// WorkItem and proposal state changes. The authority folds the events it
// just decided; a worker folds the events it receives; replaying a log
// through Fold gives the authority's state. Events this state does not
// follow (messages, memberships, artifacts, policy, snapshots) leave it as
// it is. Values are replaced, never edited in place (see Group).
func (g *Group) Fold(ev Event) error {
	if g.Items == nil {
		g.Items = map[string]*WorkItem{}
	}
	if g.Proposals == nil {
		g.Proposals = map[string]*Proposal{}
	}
	switch p := ev.Payload.(type) {
	case MissionPayload:
		return g.foldMission(ev, p)
	case *Proposed:
		g.Proposals[p.ProposalID] = &Proposal{
			ProposalID: p.ProposalID, MissionID: p.MissionID, Summary: p.Summary, Proposer: p.Proposer,
			ParentWorkItemID: p.ParentWorkItemID, State: p.State, Revision: ev.Revision,
		}
	case *Authorized:
		return g.foldAuthorized(ev, p)
	case *ContextPublished:
		return g.foldContext(ev, p)
	case WorkPayload:
		w := g.Items[p.Ref().WorkItemID]
		if w == nil {
			return protocol.Errorf(protocol.CodeProtocolViolation, "%s names WorkItem %s, unknown to this Group", ev.Type, p.Ref().WorkItemID).At("/payload/workItemId")
		}
		if err := complete(ev, p); err != nil {
			return err
		}
		w = w.Clone()
		w.Revision, w.UpdatedAt, w.State = ev.Revision, ev.OccurredAt, p.Ref().State
		foldWork(w, ev, p)
		g.Items[w.WorkItemID] = w
	}
	return nil
}

func (g *Group) foldMission(ev Event, p MissionPayload) error {
	if c, ok := p.(*MissionCreated); ok {
		if c.Mission == nil {
			return missing(ev, "mission")
		}
		m := *c.Mission
		g.Mission, g.Ancestors, g.Profiles = &m, c.Ancestors, c.ExtensionProfiles
	}
	if g.Mission == nil {
		return protocol.Errorf(protocol.CodeProtocolViolation, "%s before mission.created", ev.Type)
	}
	m := *g.Mission
	m.Revision, m.State = ev.Revision, p.Ref().State
	switch p := p.(type) {
	case *CoordinatorAssigned:
		m.Coordinator = copyCoordinator(p.Coordinator)
	case *CoordinatorRenewed:
		m.Coordinator = copyCoordinator(p.Coordinator)
	case *ChildCreated:
		if p.Child == nil {
			return missing(ev, "child")
		}
		if w := g.Items[p.Child.ParentWorkItemID]; w != nil {
			w = w.Clone()
			w.ChildMissionID, w.ChildGroupID, w.ChildFailure = p.Child.ChildMissionID, p.Child.ChildGroupID, p.Child.OnChildFailure
			g.Items[w.WorkItemID] = w
		}
	}
	g.Mission = &m
	return nil
}

func (g *Group) foldAuthorized(ev Event, p *Authorized) error {
	if p.Contract == nil {
		return missing(ev, "contract")
	}
	g.Items[p.WorkItemID] = &WorkItem{WorkItem: protocol.WorkItem{
		WorkItemID: p.WorkItemID, MissionID: p.MissionID, GroupID: g.GroupID, State: p.State,
		Contract: *p.Contract, Revision: ev.Revision, CreatedAt: ev.OccurredAt, UpdatedAt: ev.OccurredAt,
	}}
	if pr := g.Proposals[p.ProposalID]; pr != nil {
		c := *pr
		c.State, c.AuthorizedAs = p.State, p.WorkItemID
		g.Proposals[c.ProposalID] = &c
	}
	return nil
}

// foldWork applies a WorkItem event's payload to w, a fresh copy whose
// revision, time and state are already set.
func foldWork(w *WorkItem, ev Event, p WorkPayload) {
	switch p := p.(type) {
	case *ContractRevised:
		w.Contract = *p.Contract
	case *OfferCreated:
		if p.FencedOwnershipEpoch != nil {
			releaseAll(w)
		}
		w.Contract = *p.Contract
		ids := make(protocol.List[string], len(p.Candidates))
		for i, c := range p.Candidates {
			ids[i] = c.AgentID
		}
		w.Offer = &protocol.Offer{OfferID: p.OfferID, Candidates: ids, ExpiresAt: *p.OfferExpiresAt}
		w.StartWithinMs = p.StartWithinMs
		w.Lease = nil
	case *OfferAccepted:
		w.Ownership = copyGrant(p.Ownership)
		w.AcceptedRevision = p.ContractRevision
		if !p.RenewedAcceptance {
			w.LastOwnershipEpoch = p.Ownership.OwnershipEpoch
			w.WonOfferID = p.OfferID
			w.Offer = nil
			w.Attempts++
		}
	case *ExecutionGranted:
		a := *p.Approval
		w.ExecutionApproval = &a
	case *Started:
		w.Ownership = copyGrant(p.Ownership)
		w.Lease = copyLease(p.Lease)
		w.LeaseSeq++
	case *Progressed:
		switch {
		case p.Lease != nil:
			w.Lease = copyLease(p.Lease)
		case p.Reason == ReasonSessionReplaced:
			w.Lease = nil
		}
	case *Checkpointed:
		k := *p.Checkpoint
		w.Checkpoint = &k
		if p.Reason != ReasonOfflineReconciled {
			w.Lease = nil
			w.Ownership = copyGrant(p.Ownership)
		}
	case *Blocked:
		if p.Checkpoint != nil {
			k := *p.Checkpoint
			w.Checkpoint = &k
		}
		b := *p.Blocker
		w.Blocker = &b
		w.Offer, w.Lease = nil, nil
		w.BlockedUntil = copyTime(p.BlockedUntil)
		if p.ChildMissionID != "" && p.ChildGroupID == "" { // the child ended
			w.ChildMissionID, w.ChildGroupID = "", ""
		}
	case *Unblocked:
		w.Blocker = nil
		switch {
		case p.Ownership != nil:
			w.BlockedUntil = nil
			w.Ownership = copyGrant(p.Ownership)
		case p.FencedOwnershipEpoch != nil:
			releaseAll(w)
		}
	case *Submitted:
		w.Lease = nil
	case *ResultAccepted:
		if p.ChildMissionID != "" { // verified by the linked child's approval
			w.Blocker = nil
		}
	case *Failed, *Cancelled:
		releaseAll(w)
	}
}

// complete checks the members Fold dereferences; the event schemas require
// them, and Fold must not panic on an event that skipped validation.
func complete(ev Event, p WorkPayload) error {
	switch p := p.(type) {
	case *ContractRevised:
		if p.Contract == nil {
			return missing(ev, "contract")
		}
	case *OfferCreated:
		if p.Contract == nil || p.OfferExpiresAt == nil {
			return missing(ev, "contract and offerExpiresAt")
		}
	case *OfferAccepted:
		if p.Ownership == nil {
			return missing(ev, "ownership")
		}
	case *ExecutionGranted:
		if p.Approval == nil {
			return missing(ev, "approval")
		}
	case *Checkpointed:
		if p.Checkpoint == nil {
			return missing(ev, "checkpoint")
		}
	case *Blocked:
		if p.Blocker == nil {
			return missing(ev, "blocker")
		}
	}
	return nil
}

func missing(ev Event, what string) error {
	return protocol.Errorf(protocol.CodeSchemaValidationFailed, "%s payload lacks %s", ev.Type, what).At("/payload")
}

// Touches lists the WorkItems an event changes when folded: the ones a
// follower holding only some of the Group's records must supply.
func Touches(ev Event) []string {
	switch p := ev.Payload.(type) {
	case WorkPayload:
		return []string{p.Ref().WorkItemID}
	case *ChildCreated:
		if p.Child != nil {
			return []string{p.Child.ParentWorkItemID}
		}
	}
	return nil
}

// The reasons of automatic events that Fold tells apart.
const (
	ReasonSessionReplaced   = "session_replaced"
	ReasonOfflineReconciled = "offline_reconciled"
)

func copyCoordinator(c *protocol.CoordinatorLease) *protocol.CoordinatorLease {
	if c == nil {
		return nil
	}
	x := *c
	return &x
}

func copyTime(t *protocol.Time) *protocol.Time {
	if t == nil {
		return nil
	}
	x := *t
	return &x
}
