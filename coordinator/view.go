package coordinator

import (
	"slices"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// view is what the coordinator knows of its Group: group.Fold's Mission
// and WorkItems, plus what the state machine does not keep and a review
// or an offer needs (memberships, manifests, submissions, each agent's
// record in this log). It is a pure fold of the authority's events, so a
// coordinator restarted on the same log decides the same.
type view struct {
	g       *group.Group
	lastSeq uint64

	members map[protocol.Actor]protocol.Membership
	// manifests are the published manifests by WorkItem and content hash:
	// the same bytes may be published for several items.
	manifests map[[2]string]protocol.ArtifactManifest
	items     map[string]*itemLog
	agents    map[string]*agentLog
	// published holds every content hash published in the Group.
	published map[string]bool
	// changes are the Mission's change requests in order; requests
	// their artifacts by digest (ChangeRequest.Bytes).
	changes  []ChangeRequest
	requests map[string][]byte
	// assigned is the last coordinator epoch each agent was assigned:
	// a coordinator restarted after its replacement knows it was fenced.
	assigned map[string]uint64
}

// itemLog is one WorkItem's history beyond its current record.
type itemLog struct {
	offers int // work.offer.created so far
	// offered are the agents offered the item since it was last taken,
	// failed or fenced: an exclusive offer goes to the next one.
	offered []string
	// fenced are the agents whose ownership of it lapsed.
	fenced   []string
	failures int
	failedAt time.Time
	// submission is the last work.submitted; accepted is set once a
	// work.result.accepted follows it.
	submission *submission
	accepted   *submission
	// acceptedEvent is the eventId of the work.result.accepted that
	// accepted it, which its dependents' context packages cite.
	acceptedEvent string
	evidence      []protocol.Evidence // the accepting review's evidence
}

type submission struct {
	seq       uint64
	agent     string
	artifacts []string
	evidence  []protocol.Evidence
	reviewed  bool // a result or a failure followed it
}

// agentLog is an agent's record in this log: its reliability and the
// schedule it disclosed when it last accepted an offer.
type agentLog struct {
	accepted, failed, lapsed uint64
	disclosure               *protocol.ScheduleDisclosure
}

func newView(groupID string) *view {
	return &view{g: group.NewGroup(groupID, group.Limits{}), members: map[protocol.Actor]protocol.Membership{},
		manifests: map[[2]string]protocol.ArtifactManifest{}, items: map[string]*itemLog{}, agents: map[string]*agentLog{},
		published: map[string]bool{}, requests: map[string][]byte{}, assigned: map[string]uint64{}}
}

func (v *view) item(id string) *itemLog {
	l := v.items[id]
	if l == nil {
		l = &itemLog{}
		v.items[id] = l
	}
	return l
}

func (v *view) agent(id string) *agentLog {
	a := v.agents[id]
	if a == nil {
		a = &agentLog{}
		v.agents[id] = a
	}
	return a
}

// apply folds one event. Events come in sequence order; a gap, another
// Group's event or a payload that does not decode is PROTOCOL_VIOLATION.
func (v *view) apply(ev *protocol.Event) error {
	if ev.GroupID != v.g.GroupID || ev.Seq() != v.lastSeq+1 {
		return protocol.Errorf(protocol.CodeProtocolViolation, "coordinator: event %s is %s/%d, expected %s/%d", ev.EventID, ev.GroupID, ev.Seq(), v.g.GroupID, v.lastSeq+1)
	}
	v.lastSeq = ev.Seq()
	if _, known := group.Events[ev.Type]; !known {
		return nil // an extension this coordinator does not follow
	}
	fe, err := group.FromWire(ev)
	if err != nil {
		return protocol.Errorf(protocol.CodeProtocolViolation, "coordinator: event %s: %v", ev.EventID, err)
	}
	before := v.itemOf(fe)
	if err := v.g.Fold(fe); err != nil {
		return err
	}
	v.note(ev, fe, before)
	return nil
}

// itemOf is the current record of the WorkItem a work event names, or nil.
func (v *view) itemOf(fe group.Event) *group.WorkItem {
	if wp, ok := fe.Payload.(group.WorkPayload); ok {
		return v.g.Items[wp.Ref().WorkItemID]
	}
	return nil
}

// note keeps what the state machine does not: memberships, manifests,
// assignments, change requests and each item's and agent's history.
// before is the event's WorkItem before it.
func (v *view) note(ev *protocol.Event, fe group.Event, before *group.WorkItem) {
	switch p := fe.Payload.(type) {
	case *protocol.Membership:
		v.members[p.Principal] = group.MembershipAfter(ev.Type, *p)
	case *group.ArtifactPublished:
		v.manifests[[2]string{p.Manifest.WorkItemID, p.Manifest.ContentHash}] = p.Manifest
		v.published[p.Manifest.ContentHash] = true
	case *group.CoordinatorAssigned:
		if p.Coordinator != nil {
			v.assigned[p.Coordinator.AgentID] = max(v.assigned[p.Coordinator.AgentID], p.Coordinator.CoordinatorEpoch)
		}
	case *group.ChangesRequested:
		cr := ChangeRequest{Changes: p.Changes, Comment: p.Comment}
		v.changes = append(v.changes, cr)
		v.requests[protocol.Digest(cr.Bytes())] = cr.Bytes()
	case group.WorkPayload:
		v.applyWork(ev, before, p)
	}
}

func (v *view) applyWork(ev *protocol.Event, before *group.WorkItem, p group.WorkPayload) {
	l := v.item(p.Ref().WorkItemID)
	switch p := p.(type) {
	case *group.OfferCreated:
		l.offers++
		if p.FencedOwnershipEpoch != nil && before != nil && before.Ownership != nil {
			owner := before.Ownership.OwnerAgentID
			v.agent(owner).lapsed++
			l.fenced = append(l.fenced, owner)
			l.offered = nil
		}
		for _, c := range p.Candidates {
			if !slices.Contains(l.offered, c.AgentID) {
				l.offered = append(l.offered, c.AgentID)
			}
		}
	case *group.OfferAccepted:
		if !p.RenewedAcceptance && p.Ownership != nil {
			a := v.agent(p.Ownership.OwnerAgentID)
			if p.ScheduleDisclosure != nil {
				sd := *p.ScheduleDisclosure
				a.disclosure = &sd
			}
			l.offered = nil
		}
	case *group.Submitted:
		l.submission = &submission{seq: ev.Seq(), agent: ev.Actor.ID, artifacts: p.Artifacts, evidence: p.Evidence}
	case *group.ResultAccepted:
		if s := l.submission; s != nil {
			s.reviewed = true
			l.accepted, l.evidence, l.acceptedEvent = s, p.Evidence, ev.EventID
			v.agent(s.agent).accepted++
		}
	case *group.Failed:
		l.failures++
		l.failedAt = ev.OccurredAt.Time
		l.offered = nil
		if s := l.submission; s != nil && !s.reviewed {
			s.reviewed = true
			v.agent(s.agent).failed++
		} else if p.Ownership != nil {
			v.agent(p.Ownership.OwnerAgentID).failed++
		}
	}
}

// membershipEpoch is a's membership epoch in the Group (0: none).
func (v *view) membershipEpoch(a protocol.Actor) uint64 {
	return v.members[a].MembershipEpoch
}

// mayWork reports whether agentID may be offered work: the rule the
// authority refuses an offer's candidates by (group.CheckCandidate), an
// active member holding the worker role.
func (v *view) mayWork(agentID string) bool {
	m, ok := v.members[protocol.Actor{Kind: protocol.ActorAgent, ID: agentID}]
	return ok && group.CheckCandidate(v.g.GroupID, agentID, &m, "") == nil
}

func (v *view) isMember(agentID string) bool {
	return v.members[protocol.Actor{Kind: protocol.ActorAgent, ID: agentID}].State == protocol.MembershipActive
}

// coordinator is the Mission's coordinator lease, or nil.
func (v *view) coordinator() *protocol.CoordinatorLease {
	if v.g.Mission == nil {
		return nil
	}
	return v.g.Mission.Coordinator
}

func (v *view) missionState() protocol.MissionState {
	if v.g.Mission == nil {
		return ""
	}
	return v.g.Mission.State
}

// lapsed reports whether w's owner no longer holds it at now: an owner
// whose start deadline or lease passed, fenced by the next offer.
func lapsed(w *group.WorkItem, now time.Time) bool {
	return w.Ownership != nil && (w.State == protocol.WorkQueued || w.State == protocol.WorkActive || w.State == protocol.WorkBlocked) && !w.OwnerActive(now)
}
