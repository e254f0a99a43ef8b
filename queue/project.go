package queue

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/missionweave/mwp-worker/protocol"
)

// fact is the part of a Group event the projection reads.
type fact struct {
	EventID     string
	Seq         uint64
	Type        protocol.EventType
	Aggregate   *protocol.Aggregate
	Revision    uint64
	Actor       protocol.Actor
	CausationID string
	OccurredAt  protocol.Time
	Payload     json.RawMessage
}

func factOf(ev *protocol.Event) fact {
	return fact{
		EventID: ev.EventID, Seq: ev.Seq(), Type: ev.Type, Aggregate: ev.Aggregate,
		Revision: ev.Rev(), Actor: ev.Actor, CausationID: ev.CausationID,
		OccurredAt: ev.OccurredAt, Payload: ev.Payload,
	}
}

// payload holds every payload member the projection reads, for all event
// types at once; encoding/json skips the rest. Event payloads mirror their
// command's payload plus authority-assigned members (docs/shapes.md); the
// authority-assigned ones are read defensively (see doc.go).
type payload struct {
	WorkItemID string          `json:"workItemId"`
	MissionID  string          `json:"missionId"`
	Contract   *contractInputs `json:"contract"`
	OfferID    string          `json:"offerId"`
	Candidates []candidate     `json:"candidates"`
	ExpiresAt  *protocol.Time  `json:"expiresAt"`
	// OfferExpiresAt is work.offer.created's expiry (group.OfferCreated).
	OfferExpiresAt   *protocol.Time           `json:"offerExpiresAt"`
	ContractRevision *uint64                  `json:"contractRevision"`
	OwnershipEpoch   *uint64                  `json:"ownershipEpoch"`
	Ownership        *protocol.OwnershipGrant `json:"ownership"`
	OwnerAgentID     string                   `json:"ownerAgentId"`
	StartDeadline    *protocol.Time           `json:"startDeadline"`
	Lease            *Lease                   `json:"lease"`
	LeaseID          string                   `json:"leaseId"`
	CheckpointID     string                   `json:"checkpointId"`
	StateDigest      string                   `json:"stateDigest"`
	// Resolution is an object in work.blocked and a string in work.unblocked.
	Resolution       json.RawMessage         `json:"resolution"`
	State            protocol.WorkItemState  `json:"state"`
	Dependencies     []protocol.Dependency   `json:"dependencies"`
	PriorityClass    protocol.PriorityClass  `json:"priorityClass"`
	ParentWorkItemID string                  `json:"parentWorkItemId"`
	ChildMissionID   string                  `json:"childMissionId"`
	Checkpoint       *protocol.CheckpointRef `json:"checkpoint"`
	// Membership events carry the whole record; its state ("active",
	// "ended") decodes into State above.
	Principal       *protocol.Actor `json:"principal"`
	MembershipEpoch *uint64         `json:"membershipEpoch"`
	// Mission is the whole record some authorities put in Mission events
	// (authority-lite does: {missionId, state, mission: {...}}).
	Mission *struct {
		PriorityClass protocol.PriorityClass `json:"priorityClass"`
	} `json:"mission"`
}

// candidate is an offer candidate: {agentId, selectionBasis} in a
// work.offer.created payload, a bare agent id in a WorkItem's offer.
type candidate string

func (c *candidate) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = candidate(s)
		return nil
	}
	var o struct {
		AgentID string `json:"agentId"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*c = candidate(o.AgentID)
	return nil
}

// projected lists the event types the view reads; the payloads of the rest
// (messages, memberships, proposals, artifacts, coordinator leases, policy
// grants, usage records, snapshots, unknown extensions) are never decoded.
var projected = map[protocol.EventType]bool{
	protocol.EvtMissionCreated: true, protocol.EvtMissionSubmittedForApproval: true,
	protocol.EvtMissionApproved: true, protocol.EvtMissionChangesRequested: true,
	protocol.EvtMissionCancelled: true, protocol.EvtMissionTerminated: true,
	protocol.EvtGroupArchived: true, protocol.EvtMissionChildCreated: true,
	protocol.EvtWorkAuthorized: true, protocol.EvtWorkOfferCreated: true,
	protocol.EvtWorkOfferAccepted: true, protocol.EvtWorkStarted: true,
	protocol.EvtWorkProgressed: true, protocol.EvtWorkCheckpointed: true,
	protocol.EvtWorkBlocked: true, protocol.EvtWorkUnblocked: true,
	protocol.EvtWorkSubmitted: true, protocol.EvtWorkResultAccepted: true,
	protocol.EvtWorkFailed: true, protocol.EvtWorkCancelled: true,
	protocol.EvtWorkContractRevised: true, protocol.EvtApprovalExecutionGranted: true,
	protocol.EvtMembershipChanged: true, protocol.EvtMembershipEnded: true,
	protocol.EvtMembershipDelegationGranted: true,
}

// view is what the pure projection step reads: the Group's current
// projection. Entries returned are never modified by the step.
type view interface {
	item(id string) *Entry
	mission() MissionView
	dependents(id string) []string
	itemIDs() []string // sorted
}

// change is the result of one step: the new versions of the entries and
// mission view it changed.
type change struct {
	items   []*Entry
	mission *MissionView
	members []Member
}

// stepper accumulates one step's changes over a view.
type stepper struct {
	v       view
	out     map[string]*Entry
	order   []string
	mission *MissionView
	members []Member
}

func (s *stepper) get(id string) *Entry {
	if e, ok := s.out[id]; ok {
		return e
	}
	return s.v.item(id)
}

// edit returns a private copy of item id for changing, or nil if unknown.
func (s *stepper) edit(id string) *Entry {
	if e, ok := s.out[id]; ok {
		return e
	}
	e := s.v.item(id)
	if e == nil {
		return nil
	}
	c := e.clone()
	s.put(c)
	return c
}

func (s *stepper) put(e *Entry) {
	if s.out == nil {
		s.out = make(map[string]*Entry)
	}
	if _, ok := s.out[e.WorkItemID]; !ok {
		s.order = append(s.order, e.WorkItemID)
	}
	s.out[e.WorkItemID] = e
}

func (s *stepper) editMission() *MissionView {
	if s.mission == nil {
		m := s.v.mission()
		s.mission = &m
	}
	return s.mission
}

// project applies one event to a Group's projection and returns what
// changed. It is pure: the same view and event give the same change, with
// no clock, randomness or I/O. The authority already validated the
// transition, so the view follows its facts; an event the view cannot
// interpret changes nothing and yields a *protocol.Error (the event itself
// stays in the inbox and the cursor moves on).
func project(v view, f *fact) (change, *protocol.Error) {
	if !projected[f.Type] {
		return change{}, nil
	}
	var p payload
	if len(f.Payload) > 0 && !bytes.Equal(f.Payload, []byte("null")) {
		if err := json.Unmarshal(f.Payload, &p); err != nil {
			return change{}, protocol.Errorf(protocol.CodeSchemaValidationFailed,
				"%s payload: %v", f.Type, err).At("/payload")
		}
	}
	return projectPayload(v, f, &p)
}

// projectPayload is project with the payload already decoded.
func projectPayload(v view, f *fact, p *payload) (change, *protocol.Error) {
	if !projected[f.Type] {
		return change{}, nil
	}
	s := &stepper{v: v}
	if err := s.apply(f, p); err != nil {
		return change{}, err
	}
	s.propagate(f)
	c := change{mission: s.mission, members: s.members}
	for _, id := range s.order {
		c.items = append(c.items, s.out[id])
	}
	return c, nil
}

func (s *stepper) apply(f *fact, p *payload) *protocol.Error {
	switch f.Type {
	case protocol.EvtMembershipChanged, protocol.EvtMembershipEnded, protocol.EvtMembershipDelegationGranted:
		return s.membership(f, p)
	case protocol.EvtMissionCreated:
		m := s.editMission()
		m.MissionID, m.State, m.PriorityClass = p.MissionID, protocol.MissionActive, p.PriorityClass
		if m.PriorityClass == "" && p.Mission != nil {
			m.PriorityClass = p.Mission.PriorityClass
		}
		m.Revision, m.UpdatedSeq = f.Revision, f.Seq
	case protocol.EvtMissionSubmittedForApproval:
		s.missionState(f, protocol.MissionAwaitingApproval)
	case protocol.EvtMissionApproved:
		s.missionState(f, protocol.MissionApproved)
	case protocol.EvtMissionChangesRequested:
		s.missionState(f, protocol.MissionActive)
	case protocol.EvtMissionCancelled:
		s.missionState(f, protocol.MissionCancelled)
		s.endUnfinished(f, protocol.WorkCancelled)
	case protocol.EvtMissionTerminated:
		s.missionState(f, protocol.MissionTerminated)
		s.endUnfinished(f, protocol.WorkFailed)
	case protocol.EvtGroupArchived:
		m := s.editMission()
		m.Archived, m.UpdatedSeq = true, f.Seq
	case protocol.EvtMissionChildCreated:
		if p.ParentWorkItemID == "" {
			return missing(f, "parentWorkItemId")
		}
		e := s.edit(p.ParentWorkItemID)
		if e == nil {
			return unknownItem(f, p.ParentWorkItemID)
		}
		e.State, e.ChildMissionID, e.Lease = protocol.WorkBlocked, p.ChildMissionID, nil
		touch(e, f, false)

	case protocol.EvtWorkAuthorized:
		if p.WorkItemID == "" || p.Contract == nil {
			return missing(f, "workItemId and contract")
		}
		e := s.get(p.WorkItemID)
		if e == nil {
			e = &Entry{WorkItemID: p.WorkItemID}
		} else {
			e = e.clone()
		}
		e.MissionID = p.MissionID
		e.State = protocol.WorkOpen
		e.setContract(p.Contract, f.Seq)
		s.fillDependencies(e)
		touch(e, f, true)
		s.put(e)
	case protocol.EvtWorkOfferCreated:
		if p.WorkItemID == "" {
			return missing(f, "workItemId")
		}
		e := s.get(p.WorkItemID)
		switch {
		case e != nil:
			e = e.clone()
		case p.Contract != nil:
			e = &Entry{WorkItemID: p.WorkItemID, MissionID: p.MissionID}
		default:
			return unknownItem(f, p.WorkItemID)
		}
		if p.Contract != nil {
			e.setContract(p.Contract, f.Seq)
			s.fillDependencies(e)
		}
		o := &Offer{OfferID: p.OfferID}
		for _, c := range p.Candidates {
			o.Candidates = append(o.Candidates, string(c))
		}
		if p.OfferExpiresAt != nil {
			o.ExpiresAt = *p.OfferExpiresAt
		}
		// An offer replaces the previous one; an expired owner is fenced
		// first (spec 10.2), so the view drops ownership and lease.
		e.State, e.Offer, e.Lease = protocol.WorkOffered, o, nil
		e.Owner, e.OwnershipEpoch, e.StartDeadline = "", 0, protocol.Time{}
		e.EnqueuedAt = protocol.Time{}
		touch(e, f, true)
		s.put(e)
	case protocol.EvtWorkOfferAccepted:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		owner, epoch, deadline := f.Actor.ID, p.OwnershipEpoch, p.StartDeadline
		if g := p.Ownership; g != nil {
			owner, epoch, deadline = g.OwnerAgentID, &g.OwnershipEpoch, &g.StartDeadline
		} else if p.OwnerAgentID != "" {
			owner = p.OwnerAgentID
		}
		if epoch == nil {
			return missing(f, "ownership.ownershipEpoch")
		}
		e.Owner, e.OwnershipEpoch = owner, *epoch
		e.StartDeadline = protocol.Time{}
		if deadline != nil {
			e.StartDeadline = *deadline
		}
		if p.ContractRevision != nil {
			e.ContractRevision = *p.ContractRevision
		}
		e.State, e.Offer, e.Lease = protocol.WorkQueued, nil, nil
		e.EnqueuedAt = f.OccurredAt
		touch(e, f, true)
	case protocol.EvtWorkStarted:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		l := leaseOf(p)
		if l == nil {
			return missing(f, "lease.leaseId")
		}
		e.State, e.Lease = protocol.WorkActive, l
		e.StartDeadline = protocol.Time{}
		e.Attempts++
		touch(e, f, true)
	case protocol.EvtWorkProgressed:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		// A lease renewal carries the new expiry; plain progress changes
		// no scheduling input.
		if l := leaseOf(p); l != nil && l.ExpiresAt != (protocol.Time{}) {
			if e.Lease != nil && e.Lease.LeaseID == l.LeaseID {
				if l.AgentID == "" {
					l.AgentID = e.Lease.AgentID
				}
				if l.SessionEpoch == 0 {
					l.SessionEpoch = e.Lease.SessionEpoch
				}
			}
			e.Lease = l
		}
		// A replacement session revokes the lease and returns the item to
		// queued, ownership kept (spec 11.3): the event says so in its state.
		if p.State == protocol.WorkQueued && e.State == protocol.WorkActive {
			e.State, e.Lease = protocol.WorkQueued, nil
			e.EnqueuedAt = f.OccurredAt
		}
		touch(e, f, true)
	case protocol.EvtWorkCheckpointed:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		s.checkpoint(e, f, p)
		if p.State != "" && p.State != protocol.WorkQueued {
			// A reconciled offline checkpoint of a lease no longer current
			// (authority-lite's historical form, state unchanged) records
			// the checkpoint only.
			touch(e, f, true)
			break
		}
		e.State, e.Lease = protocol.WorkQueued, nil
		e.EnqueuedAt = f.OccurredAt
		touch(e, f, true)
	case protocol.EvtWorkBlocked:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		s.checkpoint(e, f, p)
		var r protocol.Resolution
		if len(p.Resolution) > 0 && p.Resolution[0] == '{' {
			if err := json.Unmarshal(p.Resolution, &r); err != nil {
				return protocol.Errorf(protocol.CodeSchemaValidationFailed, "%s payload: %v", f.Type, err).At("/payload/resolution")
			}
			e.Blocker = &r
		}
		e.State, e.Lease = protocol.WorkBlocked, nil
		touch(e, f, true)
	case protocol.EvtWorkUnblocked:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		// The authority decides between queued and open (ownership may have
		// expired on its clock); without its answer, ownership decides.
		next := p.State
		if next != protocol.WorkQueued && next != protocol.WorkOpen {
			next = protocol.WorkOpen
			if e.Owner != "" {
				next = protocol.WorkQueued
			}
		}
		e.State, e.Blocker, e.Lease = next, nil, nil
		if next == protocol.WorkQueued {
			e.EnqueuedAt = f.OccurredAt
		} else {
			e.Owner, e.OwnershipEpoch, e.StartDeadline = "", 0, protocol.Time{}
			e.EnqueuedAt = protocol.Time{}
		}
		touch(e, f, true)
	case protocol.EvtWorkSubmitted:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		e.State, e.Lease = protocol.WorkSubmitted, nil
		touch(e, f, true)
	case protocol.EvtWorkResultAccepted:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		e.State, e.Lease = protocol.WorkVerified, nil
		touch(e, f, true)
	case protocol.EvtWorkFailed:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		// Failure returns control to the coordinator: only a new offer moves
		// the item on, so ownership ends. The checkpoint stays for a
		// reassignment that resumes from it (spec 11.5).
		e.State, e.Lease, e.Offer = protocol.WorkFailed, nil, nil
		e.Owner, e.OwnershipEpoch, e.StartDeadline = "", 0, protocol.Time{}
		touch(e, f, true)
	case protocol.EvtWorkCancelled:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		e.State, e.Lease, e.Offer = protocol.WorkCancelled, nil, nil
		touch(e, f, true)
	case protocol.EvtWorkContractRevised:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		if p.Contract != nil {
			e.setContract(p.Contract, f.Seq)
		} else {
			for _, d := range p.Dependencies {
				if !slices.ContainsFunc(e.Dependencies, func(x Dependency) bool { return x.WorkItemID == d.WorkItemID }) {
					e.Dependencies = append(e.Dependencies, Dependency{WorkItemID: d.WorkItemID, Policy: d.Policy})
				}
			}
			if p.ContractRevision != nil {
				e.ContractRevision = *p.ContractRevision
			}
		}
		s.fillDependencies(e)
		touch(e, f, true)
	case protocol.EvtApprovalExecutionGranted:
		e, err := s.target(f, p)
		if err != nil {
			return err
		}
		if p.ContractRevision == nil {
			return missing(f, "contractRevision")
		}
		e.ApprovedRevision = *p.ContractRevision
		e.ApprovalExpiresAt = protocol.Time{}
		if p.ExpiresAt != nil {
			e.ApprovalExpiresAt = *p.ExpiresAt
		}
		// The approval is its own aggregate: the item's revision stays.
		touch(e, f, false)
	}
	return nil
}

// target returns a private copy of the item named by the payload.
func (s *stepper) target(f *fact, p *payload) (*Entry, *protocol.Error) {
	id := p.WorkItemID
	if id == "" && f.Aggregate != nil && f.Aggregate.Kind == protocol.AggregateWorkItem {
		id = f.Aggregate.ID
	}
	if id == "" {
		return nil, missing(f, "workItemId")
	}
	e := s.edit(id)
	if e == nil {
		return nil, unknownItem(f, id)
	}
	return e, nil
}

func (s *stepper) missionState(f *fact, st protocol.MissionState) {
	m := s.editMission()
	m.State, m.UpdatedSeq = st, f.Seq
	if f.Aggregate != nil && f.Aggregate.Kind == protocol.AggregateMission {
		m.Revision = f.Revision
	}
}

// endUnfinished propagates a terminal Mission to every unfinished item
// (spec 10.2, last row). Items are visited in id order so the step is
// deterministic.
func (s *stepper) endUnfinished(f *fact, to protocol.WorkItemState) {
	for _, id := range s.allItems() {
		e := s.get(id)
		switch e.State {
		case protocol.WorkOpen, protocol.WorkOffered, protocol.WorkQueued, protocol.WorkActive,
			protocol.WorkBlocked, protocol.WorkSubmitted:
			c := s.edit(id)
			c.State, c.Lease, c.Offer = to, nil, nil
			touch(c, f, false)
		}
	}
}

// allItems lists the ids of the view and of items created in this step,
// in sorted order.
func (s *stepper) allItems() []string {
	ids := s.v.itemIDs()
	for _, id := range s.order {
		if s.v.item(id) == nil {
			ids = append(slices.Clip(ids), id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (s *stepper) checkpoint(e *Entry, f *fact, p *payload) {
	switch {
	case p.Checkpoint != nil:
		cp := *p.Checkpoint
		e.Checkpoint = &cp
	case p.CheckpointID != "":
		e.Checkpoint = &protocol.CheckpointRef{CheckpointID: p.CheckpointID, StateDigest: p.StateDigest, At: f.OccurredAt}
	}
}

// fillDependencies sets each dependency's state from the view.
func (s *stepper) fillDependencies(e *Entry) {
	for i := range e.Dependencies {
		if d := s.get(e.Dependencies[i].WorkItemID); d != nil {
			e.Dependencies[i].State = d.State
		} else {
			e.Dependencies[i].State = ""
		}
	}
}

// propagate copies every changed item's state into the entries that depend
// on it.
func (s *stepper) propagate(f *fact) {
	for i := 0; i < len(s.order); i++ {
		changed := s.out[s.order[i]]
		for _, id := range s.dependents(changed.WorkItemID) {
			d := s.get(id)
			if d == nil {
				continue
			}
			for j, dep := range d.Dependencies {
				if dep.WorkItemID == changed.WorkItemID && dep.State != changed.State {
					c := s.edit(id)
					c.Dependencies[j].State = changed.State
					if c.UpdatedSeq != f.Seq {
						c.UpdatedSeq, c.UpdatedAt = f.Seq, f.OccurredAt
					}
				}
			}
		}
	}
}

// dependents lists the items depending on id: the view's index plus items
// changed in this step that name id.
func (s *stepper) dependents(id string) []string {
	out := s.v.dependents(id)
	for _, oid := range s.order {
		e := s.out[oid]
		if slices.ContainsFunc(e.Dependencies, func(d Dependency) bool { return d.WorkItemID == id }) &&
			!slices.Contains(out, oid) {
			out = append(slices.Clip(out), oid)
		}
	}
	return out
}

// touch records that f changed e; own says whether f is an event of e's own
// aggregate (whose revision e tracks).
func touch(e *Entry, f *fact, own bool) {
	if own && f.Aggregate != nil && f.Aggregate.Kind == protocol.AggregateWorkItem && f.Aggregate.ID == e.WorkItemID {
		e.Revision = f.Revision
	}
	e.UpdatedSeq, e.UpdatedAt = f.Seq, f.OccurredAt
}

func leaseOf(p *payload) *Lease {
	if p.Lease != nil && p.Lease.LeaseID != "" {
		l := *p.Lease
		return &l
	}
	if p.LeaseID != "" {
		l := &Lease{LeaseID: p.LeaseID}
		if p.ExpiresAt != nil {
			l.ExpiresAt = *p.ExpiresAt
		}
		return l
	}
	return nil
}

func missing(f *fact, what string) *protocol.Error {
	return protocol.Errorf(protocol.CodeSchemaValidationFailed, "%s event %s: payload lacks %s", f.Type, f.EventID, what).At("/payload")
}

func unknownItem(f *fact, id string) *protocol.Error {
	return protocol.Errorf(protocol.CodeProtocolViolation, "%s event %s names work item %s, unknown to this Group's view", f.Type, f.EventID, id).At("/payload/workItemId")
}
