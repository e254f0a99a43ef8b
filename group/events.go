package group

import (
	"github.com/missionweave/mwp-worker/protocol"
)

// One Go type per event payload, defined once: the authority builds them,
// Fold and every worker read them, the event schemas are generated from
// them. Every Mission and WorkItem payload carries the aggregate's resulting
// state so a projection can follow the machine without re-deriving it.

// MissionRef opens every mission.* payload: the Mission and its state
// after the event.
type MissionRef struct {
	MissionID string                `json:"missionId"`
	State     protocol.MissionState `json:"state"`
}

// Ref returns the reference itself, so every payload that embeds it is a
// MissionPayload.
func (r *MissionRef) Ref() *MissionRef { return r }

// MissionPayload is implemented by every mission.* payload.
type MissionPayload interface{ Ref() *MissionRef }

// WorkRef opens every payload on a WorkItem aggregate: the WorkItem and
// its state after the event.
type WorkRef struct {
	WorkItemID string                 `json:"workItemId"`
	State      protocol.WorkItemState `json:"state"`
}

// Ref returns the reference itself, so every payload that embeds it is a
// WorkPayload.
func (r *WorkRef) Ref() *WorkRef { return r }

// WorkPayload is implemented by every payload on a WorkItem aggregate
// except work.proposed (a proposal is not yet a WorkItem).
type WorkPayload interface{ Ref() *WorkRef }

// MissionCreated is mission.created: Mission is the whole new record.
type MissionCreated struct {
	MissionRef
	Mission    *protocol.Mission    `json:"mission"`
	Budgets    *protocol.Budgets    `json:"budgets,omitempty"`
	Parent     *protocol.ParentLink `json:"parent,omitempty"`
	Ancestors  []string             `json:"ancestors,omitempty"`
	FollowUpOf string               `json:"followUpOf,omitempty"`
	// ExtensionProfiles are the profile versions the new Group pins.
	ExtensionProfiles []protocol.ProfilePin `json:"extensionProfiles,omitempty"`
}

// CoordinatorAssigned is mission.coordinator.assigned: a new coordinator
// epoch fences the previous one.
type CoordinatorAssigned struct {
	MissionRef
	Coordinator              *protocol.CoordinatorLease `json:"coordinator"`
	PreviousCoordinatorEpoch *uint64                    `json:"previousCoordinatorEpoch,omitempty"`
}

// CoordinatorRenewed is mission.coordinator.renewed.
type CoordinatorRenewed struct {
	MissionRef
	Coordinator *protocol.CoordinatorLease `json:"coordinator"`
}

// SubmittedForApproval is mission.submitted_for_approval.
type SubmittedForApproval struct {
	MissionRef
	Summary   string              `json:"summary"`
	Artifacts []string            `json:"artifacts,omitempty"`
	Evidence  []protocol.Evidence `json:"evidence"`
}

// MissionApproved is mission.approved.
type MissionApproved struct {
	MissionRef
	ApprovalID string          `json:"approvalId"`
	Approver   *protocol.Actor `json:"approver"`
	Comment    string          `json:"comment,omitempty"`
}

// ChangesRequested is mission.changes_requested: back to active.
type ChangesRequested struct {
	MissionRef
	Changes []string `json:"changes"`
	Comment string   `json:"comment,omitempty"`
}

// MissionClosed is mission.cancelled and mission.terminated; the
// unfinished WorkItems it closed follow as their own events.
type MissionClosed struct {
	MissionRef
	Reason              string   `json:"reason,omitempty"`
	UnfinishedWorkItems []string `json:"unfinishedWorkItems,omitempty"`
}

// ChildCreated is mission.child.created on the parent Mission.
type ChildCreated struct {
	MissionRef
	Child   *ChildLink        `json:"child"`
	Budgets *protocol.Budgets `json:"budgets,omitempty"`
}

// FollowUpCreated is mission.follow_up.created on the new Mission.
type FollowUpCreated struct {
	MissionRef
	FollowUpOf string `json:"followUpOf"`
}

// ChildLink is the parent side of mission.child.created.
type ChildLink struct {
	ParentWorkItemID string                      `json:"parentWorkItemId"`
	ChildMissionID   string                      `json:"childMissionId"`
	ChildGroupID     string                      `json:"childGroupId"`
	Title            string                      `json:"title"`
	Objective        string                      `json:"objective"`
	OnChildFailure   protocol.ChildFailurePolicy `json:"onChildFailure"`
}

// Proposed is work.proposed: a work proposal, not yet a WorkItem.
type Proposed struct {
	ProposalID       string                 `json:"proposalId"`
	MissionID        string                 `json:"missionId"`
	Summary          string                 `json:"summary"`
	Proposer         protocol.Actor         `json:"proposer"`
	ParentWorkItemID string                 `json:"parentWorkItemId,omitempty"`
	State            protocol.WorkItemState `json:"state"`
}

// Authorized is work.authorized: a proposal (or the coordinator directly)
// became an open WorkItem under a contract.
type Authorized struct {
	WorkRef
	MissionID        string                 `json:"missionId,omitempty"`
	ProposalID       string                 `json:"proposalId,omitempty"`
	Contract         *protocol.WorkContract `json:"contract"`
	ContractRevision uint64                 `json:"contractRevision"`
}

// ContractRevised is work.contract.revised: a new contract revision, from
// an offer that changed it substantially or a dependency insertion.
type ContractRevised struct {
	WorkRef
	Contract         *protocol.WorkContract `json:"contract"`
	ContractRevision uint64                 `json:"contractRevision"`
	PreviousRevision uint64                 `json:"previousContractRevision"`
	// Dependencies are the ones inserted (dependency.insert only).
	Dependencies []protocol.Dependency `json:"dependencies,omitempty"`
}

// OfferCreated is work.offer.created: the WorkItem is offered to a bounded
// candidate set until OfferExpiresAt.
type OfferCreated struct {
	WorkRef
	OfferID          string                    `json:"offerId"`
	Contract         *protocol.WorkContract    `json:"contract"`
	ContractRevision uint64                    `json:"contractRevision"`
	Candidates       []protocol.OfferCandidate `json:"candidates"`
	OfferExpiresAt   *protocol.Time            `json:"offerExpiresAt"`
	StartWithinMs    uint64                    `json:"startWithinMs,omitempty"`
	// FencedOwnershipEpoch is the expired ownership the offer fenced.
	FencedOwnershipEpoch *uint64                 `json:"fencedOwnershipEpoch,omitempty"`
	Checkpoint           *protocol.CheckpointRef `json:"checkpoint,omitempty"`
}

// OfferAccepted is work.offer.accepted: ownership granted (or, with
// RenewedAcceptance, the owner accepted a revised contract again).
type OfferAccepted struct {
	WorkRef
	OfferID            string                       `json:"offerId"`
	ContractRevision   uint64                       `json:"contractRevision"`
	Ownership          *protocol.OwnershipGrant     `json:"ownership"`
	ScheduleDisclosure *protocol.ScheduleDisclosure `json:"scheduleDisclosure,omitempty"`
	RenewedAcceptance  bool                         `json:"renewedAcceptance,omitempty"`
}

// ExecutionGranted is approval.execution.granted: the pre-execution
// approval gate is satisfied for a contract revision.
type ExecutionGranted struct {
	WorkRef
	Approval *protocol.Approval `json:"approval"`
}

// Started is work.started: an execution lease was issued.
type Started struct {
	WorkRef
	Lease                *protocol.ExecutionLease `json:"lease"`
	Ownership            *protocol.OwnershipGrant `json:"ownership"`
	ResumeFromCheckpoint string                   `json:"resumeFromCheckpointId,omitempty"`
	// CapabilityToken is issued with every new or renewed lease.
	CapabilityToken *protocol.CapabilityToken `json:"capabilityToken,omitempty"`
}

// Progressed is work.progressed: progress or a lease renewal (Lease set),
// a lease revoked by a replaced session (Reason "session_replaced") or
// progress reconciled from offline execution.
type Progressed struct {
	WorkRef
	LeaseID         string                    `json:"leaseId"`
	Lease           *protocol.ExecutionLease  `json:"lease,omitempty"`
	Progress        *protocol.Progress        `json:"progress,omitempty"`
	Reason          string                    `json:"reason,omitempty"`
	CapabilityToken *protocol.CapabilityToken `json:"capabilityToken,omitempty"`
}

// Checkpointed is work.checkpointed: active → queued at a safe point.
type Checkpointed struct {
	WorkRef
	LeaseID          string                    `json:"leaseId"`
	Checkpoint       *protocol.CheckpointRef   `json:"checkpoint"`
	CheckpointReason protocol.CheckpointReason `json:"checkpointReason,omitempty"`
	Progress         *protocol.Progress        `json:"progress,omitempty"`
	Ownership        *protocol.OwnershipGrant  `json:"ownership,omitempty"`
	Reason           string                    `json:"reason,omitempty"`
}

// Blocked is work.blocked: the WorkItem needs a resolution (or waits on a
// linked child Mission).
type Blocked struct {
	WorkRef
	LeaseID        string                   `json:"leaseId,omitempty"`
	Checkpoint     *protocol.CheckpointRef  `json:"checkpoint,omitempty"`
	Blocker        *protocol.Resolution     `json:"blocker"`
	Progress       *protocol.Progress       `json:"progress,omitempty"`
	Ownership      *protocol.OwnershipGrant `json:"ownership,omitempty"`
	ChildMissionID string                   `json:"childMissionId,omitempty"`
	// ChildGroupID is set while a linked child Mission protects the
	// ownership (mission.create_child); a block after the child ended
	// names the child but no Group.
	ChildGroupID string `json:"childGroupId,omitempty"`
	// BlockedUntil bounds how long the blocked owner keeps ownership.
	BlockedUntil *protocol.Time `json:"blockedUntil,omitempty"`
	Reason       string         `json:"reason,omitempty"`
}

// Unblocked is work.unblocked: back to queued under the same owner, or to
// open when the blocked owner's hold had lapsed.
type Unblocked struct {
	WorkRef
	Resolution           string                   `json:"resolution"`
	Ownership            *protocol.OwnershipGrant `json:"ownership,omitempty"`
	FencedOwnershipEpoch *uint64                  `json:"fencedOwnershipEpoch,omitempty"`
}

// Submitted is work.submitted: results and evidence for review.
type Submitted struct {
	WorkRef
	LeaseID   string                   `json:"leaseId"`
	Ownership *protocol.OwnershipGrant `json:"ownership"`
	Artifacts []string                 `json:"artifacts,omitempty"`
	Evidence  []protocol.Evidence      `json:"evidence"`
	Progress  *protocol.Progress       `json:"progress,omitempty"`
}

// ResultAccepted is work.result.accepted: the WorkItem is verified by
// review, or by its linked child Mission's approval.
type ResultAccepted struct {
	WorkRef
	ContractRevision uint64              `json:"contractRevision"`
	Evidence         []protocol.Evidence `json:"evidence,omitempty"`
	Comment          string              `json:"comment,omitempty"`
	ChildMissionID   string              `json:"childMissionId,omitempty"`
	ChildApprovalID  string              `json:"childApprovalId,omitempty"`
}

// Failed is work.failed.
type Failed struct {
	WorkRef
	Reason         string                   `json:"reason"`
	Evidence       []protocol.Evidence      `json:"evidence"`
	LeaseID        string                   `json:"leaseId,omitempty"`
	Ownership      *protocol.OwnershipGrant `json:"ownership,omitempty"`
	ChildMissionID string                   `json:"childMissionId,omitempty"`
}

// Cancelled is work.cancelled.
type Cancelled struct {
	WorkRef
	Reason string `json:"reason,omitempty"`
}
