package queue

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/missionweave/mwp-worker/group"

	"github.com/missionweave/mwp-worker/protocol"
)

// fact is the part of a Group event the projection reads.
type fact struct {
	EventID     string
	GroupID     string
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
		EventID: ev.EventID, GroupID: ev.GroupID, Seq: ev.Seq(), Type: ev.Type, Aggregate: ev.Aggregate,
		Revision: ev.Rev(), Actor: ev.Actor, CausationID: ev.CausationID,
		OccurredAt: ev.OccurredAt, Payload: ev.Payload,
	}
}

// projected reports whether the view follows events of type typ: the
// Mission and WorkItem events (through group.Fold), memberships and the
// archive. Messages, artifacts, policy grants, usage records and snapshots
// are stored but never decoded.
func projected(typ protocol.EventType) bool {
	switch typ {
	case protocol.EvtMembershipChanged, protocol.EvtMembershipEnded, protocol.EvtMembershipDelegationGranted,
		protocol.EvtGroupArchived, protocol.EvtContextPublished:
		return true
	case protocol.EvtWorkProposed, protocol.EvtResourceUsageRecorded:
		return false
	}
	r, ok := group.Events[typ]
	return ok && (r.Aggregate == protocol.AggregateMission || r.Aggregate == protocol.AggregateWorkItem)
}

// view is what the pure projection step reads: the Group's current
// projection. Entries returned are never modified by the step.
type view interface {
	item(id string) *Entry
	// owns reports whether e, an entry item returned, belongs to the
	// view alone, so a step may change it in place instead of a copy.
	owns(e *Entry) bool
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
	v view
	// out are the entries the step changed, in the order it first changed
	// them: a step changes one or two, so they are found by a scan until
	// there are more than a few (byID), not through a map made every step.
	out     []*Entry
	byID    map[string]int
	mission *MissionView
	members []Member
}

// changed returns the step's entry for id, or nil.
func (s *stepper) changed(id string) *Entry {
	if s.byID != nil {
		if i, ok := s.byID[id]; ok {
			return s.out[i]
		}
		return nil
	}
	for _, e := range s.out {
		if e.WorkItemID == id {
			return e
		}
	}
	return nil
}

func (s *stepper) get(id string) *Entry {
	if e := s.changed(id); e != nil {
		return e
	}
	return s.v.item(id)
}

// edit returns a private copy of item id for changing, or nil if unknown.
func (s *stepper) edit(id string) *Entry {
	if e := s.changed(id); e != nil {
		return e
	}
	e := s.v.item(id)
	if e == nil {
		return nil
	}
	if s.v.owns(e) {
		s.put(e)
		return e
	}
	c := e.clone()
	s.put(c)
	return c
}

// owned reports whether the step may change e in place: an entry it made
// or one its view owns.
func (s *stepper) owned(e *Entry) bool {
	return s.changed(e.WorkItemID) == e || s.v.owns(e)
}

func (s *stepper) put(e *Entry) {
	if s.byID != nil {
		if i, ok := s.byID[e.WorkItemID]; ok {
			s.out[i] = e
			return
		}
		s.byID[e.WorkItemID] = len(s.out)
		s.out = append(s.out, e)
		return
	}
	for i, o := range s.out {
		if o.WorkItemID == e.WorkItemID {
			s.out[i] = e
			return
		}
	}
	s.out = append(s.out, e)
	if len(s.out) > 8 {
		s.byID = make(map[string]int, 2*len(s.out))
		for i, o := range s.out {
			s.byID[o.WorkItemID] = i
		}
	}
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
// no clock, randomness or I/O. Mission and WorkItem state follows
// group.Fold, the authority's own; the view adds the worker's scheduling
// inputs beside it. An event the view cannot interpret changes nothing and
// yields a *protocol.Error (the event itself stays in the inbox and the
// cursor moves on).
func project(v view, f *fact) (change, *protocol.Error) {
	if !projected(f.Type) {
		return change{}, nil
	}
	p, err := decodePayload(f.Type, f.Payload)
	if err != nil {
		return change{}, protocolError(err)
	}
	return projectPayload(v, f, p)
}

// projectPayload is project with the payload already decoded (a pointer
// to the type group.Events names).
func projectPayload(v view, f *fact, p any) (change, *protocol.Error) {
	if !projected(f.Type) {
		return change{}, nil
	}
	s := &stepper{v: v}
	var err *protocol.Error
	switch p := p.(type) {
	case *protocol.Membership:
		err = s.membership(f, p)
	case *group.GroupArchived:
		m := s.editMission()
		m.Archived, m.UpdatedSeq = true, f.Seq
	case *group.ContextPublished:
		err = s.context(f, &p.Package)
	default:
		err = s.fold(f, p)
	}
	if err != nil {
		return change{}, err
	}
	s.propagate(f)
	return change{items: s.out, mission: s.mission, members: s.members}, nil
}

// fold applies a Mission or WorkItem event with group.Fold to the records
// it touches and derives their entries.
func (s *stepper) fold(f *fact, p any) *protocol.Error {
	ev := group.Event{Type: f.Type, Revision: f.Revision, OccurredAt: f.OccurredAt, Payload: p}
	if f.Aggregate != nil {
		ev.Aggregate = *f.Aggregate
	}
	g := &group.Group{GroupID: f.GroupID, Items: map[string]*group.WorkItem{}, Mission: s.missionRecord()}
	touched := group.Touches(ev)
	for _, id := range touched {
		if e := s.get(id); e != nil {
			// Fold replaces a record it changes with a copy (group/fold.go),
			// so the entry's own goes in without one.
			g.Items[id] = &e.Item
		}
	}
	mission := g.Mission
	if err := g.Fold(ev); err != nil {
		return protocolError(err)
	}
	if g.Mission != mission {
		m := s.editMission()
		r := *g.Mission
		m.MissionID, m.State, m.PriorityClass, m.Revision, m.UpdatedSeq = r.MissionID, r.State, r.PriorityClass, r.Revision, f.Seq
		m.Record = &r
	}
	carried := group.ContractOf(p)
	for _, id := range touched {
		w := g.Items[id]
		if w == nil {
			continue
		}
		prev := s.get(id)
		e := entryOf(prev, w, f, carried, prev != nil && s.owned(prev))
		if carried != nil {
			s.fillDependencies(e)
		}
		s.put(e)
	}
	return nil
}

// context notes the newest Context Package of a WorkItem or of the
// Mission. A package scoped elsewhere than this Group's Mission is never
// noted: the authority refuses one, and a worker that met one anyway must
// not hand it to a run (spec 13.3: no Mission's content enters another's
// context).
func (s *stepper) context(f *fact, p *protocol.ContextPackage) *protocol.Error {
	m := s.v.mission()
	if s.mission != nil {
		m = *s.mission
	}
	if err := p.Covers(f.GroupID, m.MissionID, p.Scope.WorkItemID); err != nil {
		return protocolError(err)
	}
	if id := p.Scope.WorkItemID; id != "" {
		e := s.edit(id)
		if e == nil {
			return protocol.Errorf(protocol.CodeProtocolViolation, "%s names WorkItem %s, unknown to this Group", f.Type, id).At("/payload/package/scope/workItemId")
		}
		e.ContextSeq = f.Seq
		touch(e, f, false)
		return nil
	}
	s.editMission().ContextSeq = f.Seq
	return nil
}

// missionRecord returns the Mission record the view holds, or nil. It is
// not copied: Fold replaces the record when it changes it, never writes
// through it (group/fold.go).
func (s *stepper) missionRecord() *protocol.Mission {
	m := s.v.mission()
	if s.mission != nil {
		m = *s.mission
	}
	return m.Record
}

// entryOf derives the worker's entry for w, the record Fold left, from the
// previous entry (nil for a new item): the scheduling inputs come from the
// contract the event carried, if any; the wait's start is the time the
// item entered queued. With reuse, prev itself becomes the entry (replay,
// where no one else holds it: an Entry is over a kilobyte, and replay
// made one per event).
func entryOf(prev *Entry, w *group.WorkItem, f *fact, contract *protocol.WorkContract, reuse bool) *Entry {
	var prevState protocol.WorkItemState
	var e *Entry
	switch {
	case prev != nil && reuse:
		prevState, e = prev.State, prev
	case prev != nil:
		// A copy whose lists are its own; the pointed-to members are all
		// replaced below.
		prevState, e = prev.State, new(Entry)
		*e = *prev
		e.Capabilities, e.Dependencies = slices.Clone(prev.Capabilities), slices.Clone(prev.Dependencies)
	default:
		e = new(Entry)
	}
	e.WorkItemID, e.MissionID, e.State, e.Revision = w.WorkItemID, w.MissionID, w.State, w.Revision
	if contract != nil {
		e.setContract(contract, f.Seq)
	}
	e.ApprovedRevision, e.ApprovalExpiresAt = 0, protocol.Time{}
	// An approval covers one contract revision (spec 10.2).
	if a := w.ExecutionApproval; a != nil && a.ContractRevision != nil && *a.ContractRevision == e.ContractRevision {
		e.ApprovedRevision = *a.ContractRevision
		if a.ExpiresAt != nil {
			e.ApprovalExpiresAt = *a.ExpiresAt
		}
	}
	e.Offer = nil
	if o := w.Offer; o != nil {
		e.Offer = &Offer{OfferID: o.OfferID, Candidates: slices.Clone([]string(o.Candidates)), ExpiresAt: o.ExpiresAt}
	}
	e.Owner, e.OwnershipEpoch, e.StartDeadline = "", 0, protocol.Time{}
	if o := w.Ownership; o != nil {
		e.Owner, e.OwnershipEpoch = o.OwnerAgentID, o.OwnershipEpoch
		if w.State != protocol.WorkActive {
			e.StartDeadline = o.StartDeadline
		}
	}
	e.Lease = nil
	if l := w.Lease; l != nil {
		e.Lease = &Lease{LeaseID: l.LeaseID, AgentID: l.AgentID, SessionEpoch: l.SessionEpoch, ExpiresAt: l.ExpiresAt}
	}
	e.Checkpoint, e.Blocker = nil, nil
	if c := w.Checkpoint; c != nil {
		cp := *c
		e.Checkpoint = &cp
	}
	if b := w.Blocker; b != nil {
		r := *b
		e.Blocker = &r
	}
	e.ChildMissionID, e.Attempts = w.ChildMissionID, w.Attempts
	switch {
	case w.State == protocol.WorkQueued && (prev == nil || prevState != protocol.WorkQueued):
		e.EnqueuedAt = f.OccurredAt
	case w.State == protocol.WorkOffered || w.State == protocol.WorkOpen:
		e.EnqueuedAt = protocol.Time{}
	}
	// The full contract stays in the inbox (Store.Contract): a view entry
	// keeps its scheduling inputs only.
	e.Item = *w
	e.Item.Contract = protocol.WorkContract{}
	touch(e, f, true)
	return e
}

func protocolError(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	return protocol.Errorf(protocol.CodeSchemaValidationFailed, "%v", err).At("/payload")
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
	for i := 0; i < len(s.out); i++ {
		changed := s.out[i]
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
	for _, e := range s.out {
		if slices.ContainsFunc(e.Dependencies, func(d Dependency) bool { return d.WorkItemID == id }) &&
			!slices.Contains(out, e.WorkItemID) {
			out = append(slices.Clip(out), e.WorkItemID)
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

func missing(f *fact, what string) *protocol.Error {
	return protocol.Errorf(protocol.CodeSchemaValidationFailed, "%s event %s: payload lacks %s", f.Type, f.EventID, what).At("/payload")
}
