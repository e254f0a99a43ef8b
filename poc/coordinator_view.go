package poc

import (
	"encoding/json"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// view is what a coordinator knows of its Group: a pure fold of the
// authority's event log. Everything the coordinator decides is a function
// of this view, the Mission graph and the time, so a replacement
// coordinator that replays the same log decides the same.
type view struct {
	groupID string
	lastSeq uint64

	missionState   protocol.MissionState
	coordAgent     string
	coordEpoch     uint64
	coordExpires   time.Time
	missionRev     uint64
	changeRequests []ChangeRequest // one per mission.changes_requested, in order

	members   map[string]bool // active agent members
	items     map[string]*itemView
	manifests map[string]protocol.ArtifactManifest // published, by content hash
	// reliability counts per agent and capability: ownerships won and
	// results accepted.
	reliability map[[2]string]*protocol.ReliabilityRecord
}

// itemView is one WorkItem as the log shows it.
type itemView struct {
	id            string
	state         protocol.WorkItemState
	contract      protocol.WorkContract
	revision      uint64
	owner         string
	epoch         uint64
	startDeadline time.Time
	leaseID       string
	leaseExpires  time.Time
	offerID       string
	offerExpires  time.Time
	offers        int
	failures      int
	checkpoint    string
	// fenced lists agents whose ownership lapsed (lease or start deadline).
	fenced []string
	// submission is the last work.submitted; accepted holds its artifacts
	// and the review evidence once work.result.accepted follows it.
	submission *submission
	accepted   *acceptance
}

type submission struct {
	seq       uint64
	agent     string
	epoch     uint64
	leaseID   string
	artifacts []string
	evidence  []protocol.Evidence
	reviewed  bool // a result or failure followed it
}

type acceptance struct {
	artifacts []string
	evidence  []protocol.Evidence
}

func newView(groupID string) *view {
	return &view{groupID: groupID, members: map[string]bool{}, items: map[string]*itemView{},
		manifests: map[string]protocol.ArtifactManifest{}, reliability: map[[2]string]*protocol.ReliabilityRecord{}}
}

// apply folds one event of the Group into the view. Events must come in
// sequence order; an event for another Group or out of order is an error.
func (v *view) apply(ev *protocol.Event) error {
	if ev.GroupID != v.groupID || ev.Seq() != v.lastSeq+1 {
		return protocol.Errorf(protocol.CodeProtocolViolation, "coordinator: event %s is %s/%d, expected %s/%d", ev.EventID, ev.GroupID, ev.Seq(), v.groupID, v.lastSeq+1)
	}
	v.lastSeq = ev.Seq()
	switch ev.Type {
	case protocol.EvtMissionCreated, protocol.EvtMissionCoordinatorAssigned, protocol.EvtMissionCoordinatorRenewed,
		protocol.EvtMissionSubmittedForApproval, protocol.EvtMissionApproved, protocol.EvtMissionChangesRequested,
		protocol.EvtMissionCancelled, protocol.EvtMissionTerminated:
		var p group.MissionEvent
		if err := decodeEventPayload(ev, &p); err != nil {
			return err
		}
		if p.State != "" {
			v.missionState = p.State
		}
		v.missionRev = ev.Rev()
		if p.Coordinator != nil {
			v.coordAgent, v.coordEpoch, v.coordExpires = p.Coordinator.AgentID, p.Coordinator.CoordinatorEpoch, p.Coordinator.LeaseExpiresAt.Time
		}
		if ev.Type == protocol.EvtMissionChangesRequested {
			v.changeRequests = append(v.changeRequests, ChangeRequest{Changes: p.Changes, Comment: p.Comment})
		}
	case protocol.EvtMembershipChanged, protocol.EvtMembershipEnded:
		var m protocol.Membership
		if err := decodeEventPayload(ev, &m); err != nil {
			return err
		}
		if m.Principal.Kind == protocol.ActorAgent {
			v.members[m.Principal.ID] = m.State == protocol.MembershipActive
		}
	case protocol.EvtArtifactPublished:
		var p struct {
			Manifest protocol.ArtifactManifest `json:"manifest"`
		}
		if err := decodeEventPayload(ev, &p); err != nil {
			return err
		}
		v.manifests[p.Manifest.ContentHash] = p.Manifest
	default:
		if ev.Aggregate != nil && ev.Aggregate.Kind == protocol.AggregateWorkItem {
			return v.applyWork(ev)
		}
	}
	return nil
}

func (v *view) applyWork(ev *protocol.Event) error {
	var p group.WorkItemEvent
	if err := decodeEventPayload(ev, &p); err != nil {
		return err
	}
	id := ev.Aggregate.ID
	w := v.items[id]
	if w == nil {
		if ev.Type != protocol.EvtWorkAuthorized {
			return nil // a proposal, or an item authorized before a snapshot
		}
		w = &itemView{id: id}
		v.items[id] = w
	}
	w.revision = ev.Rev()
	if p.State != "" {
		w.state = p.State
	}
	if p.Contract != nil {
		w.contract = *p.Contract
	}
	if p.Ownership != nil {
		w.owner, w.epoch, w.startDeadline = p.Ownership.OwnerAgentID, p.Ownership.OwnershipEpoch, p.Ownership.StartDeadline.Time
	}
	if p.Lease != nil {
		w.leaseID, w.leaseExpires = p.Lease.LeaseID, p.Lease.ExpiresAt.Time
	}
	switch ev.Type {
	case protocol.EvtWorkOfferCreated:
		w.offerID, w.offers = p.OfferID, w.offers+1
		if p.OfferExpiresAt != nil {
			w.offerExpires = p.OfferExpiresAt.Time
		}
		if p.FencedOwnershipEpoch != nil && w.owner != "" {
			w.fenced = append(w.fenced, w.owner)
		}
		w.owner, w.leaseID = "", ""
	case protocol.EvtWorkOfferAccepted:
		if !p.RenewedAcceptance {
			v.rel(w.owner, w.contract).Attempts++
		}
	case protocol.EvtWorkCheckpointed:
		w.leaseID = ""
		if p.Checkpoint != nil {
			w.checkpoint = p.Checkpoint.CheckpointID
		}
	case protocol.EvtWorkSubmitted:
		w.leaseID = ""
		w.submission = &submission{seq: ev.Seq(), agent: ev.Actor.ID, epoch: w.epoch, leaseID: p.LeaseID,
			artifacts: p.Artifacts, evidence: p.Evidence}
	case protocol.EvtWorkResultAccepted:
		if w.submission != nil {
			w.submission.reviewed = true
			w.accepted = &acceptance{artifacts: w.submission.artifacts, evidence: p.Evidence}
			v.rel(w.submission.agent, w.contract).Successes++
		}
	case protocol.EvtWorkFailed:
		w.failures++
		if w.submission != nil {
			w.submission.reviewed = true
		}
		w.owner, w.leaseID = "", ""
	case protocol.EvtWorkCancelled:
		w.owner, w.leaseID = "", ""
	}
	return nil
}

func (v *view) rel(agent string, c protocol.WorkContract) *protocol.ReliabilityRecord {
	capID := ""
	if len(c.RequiredCapabilities) > 0 {
		capID = c.RequiredCapabilities[0].ID
	}
	k := [2]string{agent, capID}
	r := v.reliability[k]
	if r == nil {
		r = &protocol.ReliabilityRecord{CapabilityID: capID}
		v.reliability[k] = r
	}
	return r
}

func decodeEventPayload(ev *protocol.Event, into any) error {
	if len(ev.Payload) == 0 {
		return nil
	}
	if err := json.Unmarshal(ev.Payload, into); err != nil {
		return protocol.Errorf(protocol.CodeProtocolViolation, "coordinator: event %s (%s) payload: %v", ev.EventID, ev.Type, err)
	}
	return nil
}

// ownerLapsed reports whether the item's owner no longer holds it at now:
// queued past its start deadline, or active past its lease.
func (w *itemView) ownerLapsed(now time.Time) bool {
	switch w.state {
	case protocol.WorkQueued:
		return w.owner != "" && !now.Before(w.startDeadline)
	case protocol.WorkActive:
		return w.leaseID != "" && !now.Before(w.leaseExpires)
	}
	return false
}

// nextDeadline is the earliest future time at which the view's decisions
// may change without a new event (offer, start, lease or coordinator
// expiry), or the zero time when none.
func (v *view) nextDeadline(now time.Time, renewAt time.Time) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	consider(renewAt)
	for _, w := range v.items {
		switch w.state {
		case protocol.WorkOffered:
			consider(w.offerExpires)
		case protocol.WorkQueued:
			consider(w.startDeadline)
		case protocol.WorkActive:
			consider(w.leaseExpires)
		}
	}
	return next
}
