package poc

import (
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
	if ev.Aggregate != nil && ev.Aggregate.Kind == protocol.AggregateWorkItem {
		return v.applyWork(ev)
	}
	payload, err := group.Decode(ev.Type, ev.Payload)
	if err != nil {
		if _, known := group.Events[ev.Type]; !known {
			return nil // an extension this coordinator does not follow
		}
		return protocol.Errorf(protocol.CodeProtocolViolation, "coordinator: event %s: %v", ev.EventID, err)
	}
	if m, ok := payload.(group.MissionPayload); ok {
		v.missionState, v.missionRev = m.Ref().State, ev.Rev()
	}
	switch p := payload.(type) {
	case *group.CoordinatorAssigned:
		v.coordinator(p.Coordinator)
	case *group.CoordinatorRenewed:
		v.coordinator(p.Coordinator)
	case *group.ChangesRequested:
		v.changeRequests = append(v.changeRequests, ChangeRequest{Changes: p.Changes, Comment: p.Comment})
	case *protocol.Membership:
		if p.Principal.Kind == protocol.ActorAgent {
			v.members[p.Principal.ID] = p.State == protocol.MembershipActive
		}
	case *group.ArtifactPublished:
		v.manifests[p.Manifest.ContentHash] = p.Manifest
	}
	return nil
}

func (v *view) coordinator(c *protocol.CoordinatorLease) {
	if c != nil {
		v.coordAgent, v.coordEpoch, v.coordExpires = c.AgentID, c.CoordinatorEpoch, c.LeaseExpiresAt.Time
	}
}

func (v *view) applyWork(ev *protocol.Event) error {
	payload, err := group.Decode(ev.Type, ev.Payload)
	if err != nil {
		if _, known := group.Events[ev.Type]; !known {
			return nil
		}
		return protocol.Errorf(protocol.CodeProtocolViolation, "coordinator: event %s: %v", ev.EventID, err)
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
	if wp, ok := payload.(group.WorkPayload); ok {
		w.state = wp.Ref().State
	}
	if o := group.OwnershipOf(payload); o != nil {
		w.owner, w.epoch, w.startDeadline = o.OwnerAgentID, o.OwnershipEpoch, o.StartDeadline.Time
	}
	if l := group.LeaseOf(payload); l != nil {
		w.leaseID, w.leaseExpires = l.LeaseID, l.ExpiresAt.Time
	}
	switch p := payload.(type) {
	case *group.Authorized:
		w.setContract(p.Contract)
	case *group.ContractRevised:
		w.setContract(p.Contract)
	case *group.OfferCreated:
		w.setContract(p.Contract)
		w.offerID, w.offers = p.OfferID, w.offers+1
		if p.OfferExpiresAt != nil {
			w.offerExpires = p.OfferExpiresAt.Time
		}
		if p.FencedOwnershipEpoch != nil && w.owner != "" {
			w.fenced = append(w.fenced, w.owner)
		}
		w.owner, w.leaseID = "", ""
	case *group.OfferAccepted:
		if !p.RenewedAcceptance {
			v.rel(w.owner, w.contract).Attempts++
		}
	case *group.Checkpointed:
		w.leaseID = ""
		if p.Checkpoint != nil {
			w.checkpoint = p.Checkpoint.CheckpointID
		}
	case *group.Submitted:
		w.leaseID = ""
		w.submission = &submission{seq: ev.Seq(), agent: ev.Actor.ID, epoch: w.epoch, leaseID: p.LeaseID,
			artifacts: p.Artifacts, evidence: p.Evidence}
	case *group.ResultAccepted:
		if w.submission != nil {
			w.submission.reviewed = true
			w.accepted = &acceptance{artifacts: w.submission.artifacts, evidence: p.Evidence}
			v.rel(w.submission.agent, w.contract).Successes++
		}
	case *group.Failed:
		w.failures++
		if w.submission != nil {
			w.submission.reviewed = true
		}
		w.owner, w.leaseID = "", ""
	case *group.Cancelled:
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

func (w *itemView) setContract(c *protocol.WorkContract) {
	if c != nil {
		w.contract = *c
	}
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
