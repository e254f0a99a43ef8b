package queue

import (
	"encoding/json"
	"slices"

	"github.com/missionweave/mwp-worker/group"

	"github.com/missionweave/mwp-worker/protocol"
)

// Entry is the worker's view of one WorkItem of a Group: its state and the
// scheduling inputs. Entries are immutable once stored: the store replaces
// an entry on every change and never modifies one in place, so values handed
// out by the Store may be kept and read without locks. Callers must not
// modify the slices or pointers they contain.
type Entry struct {
	WorkItemID string                 `json:"workItemId"`
	MissionID  string                 `json:"missionId,omitempty"`
	State      protocol.WorkItemState `json:"state"`
	// Revision is the aggregate revision of the last event applied to the
	// item: the expectedRevision of the worker's next command on it.
	Revision uint64 `json:"revision"`

	ContractID       string `json:"contractId,omitempty"`
	ContractRevision uint64 `json:"contractRevision,omitempty"`
	// ContractSeq is the inbox sequence of the event that last carried the
	// contract in full; at or below the Group's snapshot sequence it is the
	// snapshot. Store.Contract reads it from there.
	ContractSeq uint64 `json:"contractSeq,omitempty"`
	// ContextSeq is the inbox sequence of the newest Context Package
	// scoped to this WorkItem (spec 13.3); Store.ContextPackage reads it.
	ContextSeq uint64 `json:"contextSeq,omitempty"`

	Urgency        protocol.Urgency        `json:"urgency,omitempty"`
	BusinessImpact protocol.BusinessImpact `json:"businessImpact,omitempty"`
	Deadline       protocol.Time           `json:"deadline,omitzero"`
	Risk           protocol.RiskClass      `json:"risk,omitempty"`
	// ApprovalRequired mirrors risk.preExecutionApproval; ApprovedRevision is
	// the contract revision an approval.execution.granted covers.
	ApprovalRequired  bool                    `json:"approvalRequired,omitempty"`
	ApprovedRevision  uint64                  `json:"approvedRevision,omitempty"`
	ApprovalExpiresAt protocol.Time           `json:"approvalExpiresAt,omitzero"`
	Resources         protocol.ResourceLimits `json:"resources,omitzero"`
	Capabilities      []protocol.Capability   `json:"capabilities,omitempty"`
	Dependencies      []Dependency            `json:"dependencies,omitempty"`

	// EnqueuedAt is the authority's occurredAt of the event that last put
	// the item into queued: the start of its wait, for aging.
	EnqueuedAt protocol.Time `json:"enqueuedAt,omitzero"`

	Offer          *Offer                  `json:"offer,omitempty"`
	Owner          string                  `json:"owner,omitempty"`
	OwnershipEpoch uint64                  `json:"ownershipEpoch,omitempty"`
	StartDeadline  protocol.Time           `json:"startDeadline,omitzero"`
	Lease          *Lease                  `json:"lease,omitempty"`
	Checkpoint     *protocol.CheckpointRef `json:"checkpoint,omitempty"`
	Blocker        *protocol.Resolution    `json:"blocker,omitempty"`
	ChildMissionID string                  `json:"childMissionId,omitempty"`
	Attempts       uint64                  `json:"attempts,omitempty"`

	UpdatedSeq uint64        `json:"updatedSeq"`
	UpdatedAt  protocol.Time `json:"updatedAt,omitzero"`

	// Item is the WorkItem record as group.Fold leaves it, without its
	// contract (kept in the inbox: Store.Contract): the state the next
	// event folds onto. The members above are derived from it.
	Item group.WorkItem `json:"item"`
}

// Dependency is one prerequisite with the state the view last saw it in
// ("" while the prerequisite is unknown to this worker).
type Dependency struct {
	WorkItemID string                    `json:"workItemId"`
	Policy     protocol.DependencyPolicy `json:"policy"`
	State      protocol.WorkItemState    `json:"state,omitempty"`
}

// Satisfied reports whether the prerequisite's state meets the policy
// (spec 10.4).
func (d Dependency) Satisfied() bool {
	switch d.Policy {
	case protocol.DependencyVerified:
		return d.State == protocol.WorkVerified
	case protocol.DependencySubmitted:
		return d.State == protocol.WorkSubmitted || d.State == protocol.WorkVerified
	case protocol.DependencyTerminal:
		return d.State == protocol.WorkVerified || d.State == protocol.WorkCancelled ||
			d.State == protocol.WorkFailed
	}
	return false
}

// Offer is the standing offer on an item.
type Offer struct {
	OfferID    string        `json:"offerId"`
	Candidates []string      `json:"candidates,omitempty"`
	ExpiresAt  protocol.Time `json:"expiresAt,omitzero"`
}

// Lease is the current execution lease.
type Lease struct {
	LeaseID      string        `json:"leaseId"`
	AgentID      string        `json:"agentId,omitempty"`
	SessionEpoch uint64        `json:"sessionEpoch,omitempty"`
	ExpiresAt    protocol.Time `json:"expiresAt,omitzero"`
}

// OfferedTo reports whether agentID is a candidate of the standing offer.
func (e *Entry) OfferedTo(agentID string) bool {
	return e.Offer != nil && slices.Contains(e.Offer.Candidates, agentID)
}

// Concerns reports whether the item is offered to or owned by agentID: the
// items a worker schedules. The view keeps every item of the Group because
// dependency states need them.
func (e *Entry) Concerns(agentID string) bool {
	return e.Owner == agentID || e.OfferedTo(agentID)
}

// DependenciesSatisfied reports whether every dependency meets its policy.
func (e *Entry) DependenciesSatisfied() bool {
	for _, d := range e.Dependencies {
		if !d.Satisfied() {
			return false
		}
	}
	return true
}

// RiskGatePassed reports whether the item may start as far as the
// pre-execution approval is concerned: none required, or one granted for the
// current contract revision.
func (e *Entry) RiskGatePassed() bool {
	return !e.ApprovalRequired || (e.ApprovedRevision != 0 && e.ApprovedRevision == e.ContractRevision)
}

// clone returns a copy that can be changed without touching e: slices and
// pointed-to values are copied.
func (e *Entry) clone() *Entry {
	c := *e
	c.Capabilities = slices.Clone(e.Capabilities)
	c.Dependencies = slices.Clone(e.Dependencies)
	if e.Offer != nil {
		o := *e.Offer
		o.Candidates = slices.Clone(o.Candidates)
		c.Offer = &o
	}
	if e.Lease != nil {
		l := *e.Lease
		c.Lease = &l
	}
	if e.Checkpoint != nil {
		cp := *e.Checkpoint
		c.Checkpoint = &cp
	}
	if e.Blocker != nil {
		b := *e.Blocker
		c.Blocker = &b
	}
	return &c
}

// setContract copies the scheduling inputs of c into e; the whole
// contract stays in the inbox (Store.Contract), seq names its event.
func (e *Entry) setContract(c *protocol.WorkContract, seq uint64) {
	if c.Revision != e.ContractRevision {
		// An approval covers one contract revision (spec 10.2).
		e.ApprovedRevision = 0
		e.ApprovalExpiresAt = protocol.Time{}
	}
	e.ContractID = c.ContractID
	e.ContractRevision = c.Revision
	e.ContractSeq = seq
	e.Urgency = c.Urgency
	e.BusinessImpact = c.BusinessImpact
	e.Deadline = c.Deadline
	e.Risk = c.Risk.Class
	e.ApprovalRequired = c.Risk.PreExecutionApproval
	e.Resources = c.ResourceLimits
	// Empty lists stay nil, as they decode from the stored JSON.
	e.Capabilities = nil
	if len(c.RequiredCapabilities) > 0 {
		e.Capabilities = slices.Clone([]protocol.Capability(c.RequiredCapabilities))
	}
	e.Dependencies = nil
	for _, d := range c.Dependencies {
		e.Dependencies = append(e.Dependencies, Dependency{WorkItemID: d.WorkItemID, Policy: d.Policy})
	}
}

// MissionView is the worker's view of the Group's Mission: what the
// scheduler needs for the Group's weight and whether work may still run.
type MissionView struct {
	MissionID     string                 `json:"missionId,omitempty"`
	State         protocol.MissionState  `json:"state,omitempty"`
	PriorityClass protocol.PriorityClass `json:"priorityClass,omitempty"`
	Archived      bool                   `json:"archived,omitempty"`
	Revision      uint64                 `json:"revision,omitempty"`
	UpdatedSeq    uint64                 `json:"updatedSeq,omitempty"`
	// ContextSeq is the inbox sequence of the newest Mission-wide Context
	// Package (no WorkItem in its scope).
	ContextSeq uint64 `json:"contextSeq,omitempty"`
	// Record is the Mission as group.Fold leaves it; the members above are
	// derived from it.
	Record *protocol.Mission `json:"record,omitempty"`
}

// storedItem is how Entry.Item is written: without the contract, which
// the view does not keep (an empty contract would neither be small nor
// decode back to the same value).
type storedItem struct {
	group.WorkItem
	Contract *protocol.WorkContract `json:"contract,omitempty"` // hides the record's; always nil
}

type plainEntry Entry

// MarshalJSON writes the entry with its record's contract left out.
func (e Entry) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		plainEntry
		Item storedItem `json:"item"`
	}{plainEntry(e), storedItem{WorkItem: e.Item}})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var v struct {
		plainEntry
		Item storedItem `json:"item"`
	}
	if err := unmarshal(b, &v); err != nil {
		return err
	}
	*e = Entry(v.plainEntry)
	e.Item = v.Item.WorkItem
	return nil
}
