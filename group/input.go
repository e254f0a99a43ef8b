package group

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Input is one authenticated Command as the state machines see it. The
// command pipeline has already checked the signature, the session and
// membership epochs, the schema and the 15.1 presence rules; what is left
// depends on Group state: coordinator epoch, expected revision, who may act
// on this aggregate, the transition table, ownership and leases.
type Input struct {
	ActionID         string
	GroupID          string
	Type             protocol.CommandType
	Actor            protocol.Actor
	SessionEpoch     *uint64
	CoordinatorEpoch *uint64
	ExpectedRevision *uint64
	// Delegated is set when the pipeline verified a delegation from the
	// coordinator that covers this command (spec 10.2 "scope delegate").
	Delegated bool
	// Payload is the typed payload, a pointer as returned by
	// protocol.PayloadFor for Type.
	Payload any
	// Predecessor is the Mission a mission.create_follow_up links to, looked
	// up by the caller in its own Group; unused by every other type.
	Predecessor *protocol.Mission
}

// InputFromCommand builds an Input from a verified envelope and its decoded
// payload.
func InputFromCommand(cmd *protocol.Command, payload any) Input {
	return Input{
		ActionID:         cmd.ActionID,
		GroupID:          cmd.GroupID,
		Type:             cmd.Type,
		Actor:            cmd.Actor,
		SessionEpoch:     cmd.SessionEpoch,
		CoordinatorEpoch: cmd.CoordinatorEpoch,
		ExpectedRevision: cmd.ExpectedRevision,
		Payload:          payload,
	}
}

// EventDraft is an event the caller must append, in order and atomically
// with the rest of the same Outcome. The caller adds eventId, sequence,
// causation, correlation, occurredAt and the authority signature.
type EventDraft struct {
	Type      protocol.EventType
	Aggregate protocol.Aggregate
	// Revision is the aggregate revision after this event.
	Revision uint64
	Actor    protocol.Actor
	// Payload is a Go value that marshals to the event payload
	// (*MissionEvent, *WorkItemEvent or *ProposalEvent).
	Payload any
}

// Outcome is what one accepted input produced. On error the state is
// unchanged, Events is empty and Effects holds only audit records.
type Outcome struct {
	Events  []EventDraft
	Effects []Effect
}

// Effect is work the caller owes outside this Group's log.
type Effect interface{ effect() }

// LateResult is a work.submit fenced off by a newer ownership or an expired
// lease (spec 11.5). The caller stores it for audit; it never completes the
// WorkItem.
type LateResult struct {
	WorkItemID     string
	Actor          protocol.Actor
	ActionID       string
	OwnershipEpoch uint64
	LeaseID        string
	Code           protocol.Code
	ReceivedAt     time.Time
	Submission     protocol.SubmitWorkPayload
}

// ChildMissionRequested asks the caller to create the linked child Mission
// in its own Group with CreateLinkedMission.
type ChildMissionRequested struct {
	Link LinkedMission
}

// ParentNotice asks the caller to deliver a child Mission's terminal outcome
// to the parent Group with ApplyChildOutcome.
type ParentNotice struct {
	ParentGroupID string
	Outcome       ChildOutcome
}

func (LateResult) effect()            {}
func (ChildMissionRequested) effect() {}
func (ParentNotice) effect()          {}

// LinkedMission describes a Mission created with a link to another one: a
// child of a parent WorkItem (Parent set) or a follow-up (FollowUpOf set).
type LinkedMission struct {
	MissionID     string
	GroupID       string
	Title         string
	Objective     string
	Owner         protocol.Actor
	PriorityClass protocol.PriorityClass
	Budgets       *protocol.Budgets
	Parent        *protocol.ParentLink
	FollowUpOf    string
	// Ancestors are the Mission ids from the root down to the parent, so
	// cyclic ancestry can be refused at any depth (spec 20).
	Ancestors []string
	// Actor and CausationID are those of the command that asked for it.
	Actor       protocol.Actor
	CausationID string
}

// ChildOutcome is a linked child Mission's terminal state as seen by its
// parent WorkItem.
type ChildOutcome struct {
	ParentWorkItemID string
	ChildMissionID   string
	ChildGroupID     string
	State            protocol.MissionState
	// ApprovalID is the child's mission approval when State is approved;
	// it becomes the parent WorkItem's Evidence (spec 10.2).
	ApprovalID  string
	Reason      string
	CausationID string
}

// Limits are the authority's lease and offer policy; every duration is
// measured on the injected clock.
type Limits struct {
	// MaxCandidates bounds the candidate set of one offer (spec 10.3).
	MaxCandidates int
	// StartWithin is the ownership grant's start deadline when the offer
	// names none, and the bound on ownership kept after a checkpoint.
	StartWithin time.Duration
	// LeaseDuration is an execution lease's length and each renewal's
	// extension.
	LeaseDuration time.Duration
	// BlockedHold bounds how long a blocked owner keeps ownership.
	BlockedHold time.Duration
}

// WithDefaults fills zero fields (a Group decoded from a snapshot carries no
// Limits) from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxCandidates <= 0 {
		l.MaxCandidates = d.MaxCandidates
	}
	if l.StartWithin <= 0 {
		l.StartWithin = d.StartWithin
	}
	if l.LeaseDuration <= 0 {
		l.LeaseDuration = d.LeaseDuration
	}
	if l.BlockedHold <= 0 {
		l.BlockedHold = d.BlockedHold
	}
	return l
}

// DefaultLimits are conservative defaults for local runs.
func DefaultLimits() Limits {
	return Limits{
		MaxCandidates: 8,
		StartWithin:   5 * time.Minute,
		LeaseDuration: 2 * time.Minute,
		BlockedHold:   30 * time.Minute,
	}
}
