package group

import (
	"github.com/missionweave/mwp-worker/protocol"
)

// Event payloads are free-form in the schemas; these are the authority's
// record of each effect. Every Mission and WorkItem payload carries the
// resulting state so a projection can follow the machine without
// re-deriving it.

// MissionEvent is the payload of every mission.* event.
type MissionEvent struct {
	MissionID   string                     `json:"missionId"`
	State       protocol.MissionState      `json:"state"`
	Mission     *protocol.Mission          `json:"mission,omitempty"`
	Coordinator *protocol.CoordinatorLease `json:"coordinator,omitempty"`
	// PreviousCoordinatorEpoch is the epoch an assignment fenced.
	PreviousCoordinatorEpoch *uint64              `json:"previousCoordinatorEpoch,omitempty"`
	Summary                  string               `json:"summary,omitempty"`
	Artifacts                []string             `json:"artifacts,omitempty"`
	Evidence                 []protocol.Evidence  `json:"evidence,omitempty"`
	ApprovalID               string               `json:"approvalId,omitempty"`
	Approver                 *protocol.Actor      `json:"approver,omitempty"`
	Changes                  []string             `json:"changes,omitempty"`
	Comment                  string               `json:"comment,omitempty"`
	Reason                   string               `json:"reason,omitempty"`
	Child                    *ChildLink           `json:"child,omitempty"`
	FollowUpOf               string               `json:"followUpOf,omitempty"`
	Budgets                  *protocol.Budgets    `json:"budgets,omitempty"`
	Parent                   *protocol.ParentLink `json:"parent,omitempty"`
	Ancestors                []string             `json:"ancestors,omitempty"`
	UnfinishedWorkItems      []string             `json:"unfinishedWorkItems,omitempty"`
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

// ProposalEvent is the payload of work.proposed.
type ProposalEvent struct {
	ProposalID       string                 `json:"proposalId"`
	MissionID        string                 `json:"missionId"`
	Summary          string                 `json:"summary"`
	Proposer         protocol.Actor         `json:"proposer"`
	ParentWorkItemID string                 `json:"parentWorkItemId,omitempty"`
	State            protocol.WorkItemState `json:"state"`
}

// WorkItemEvent is the payload of every work.* event on a WorkItem and of
// approval.execution.granted.
type WorkItemEvent struct {
	WorkItemID string                 `json:"workItemId"`
	State      protocol.WorkItemState `json:"state"`
	MissionID  string                 `json:"missionId,omitempty"`
	ProposalID string                 `json:"proposalId,omitempty"`
	// Contract is set on work.authorized and work.contract.revised.
	Contract         *protocol.WorkContract    `json:"contract,omitempty"`
	ContractRevision uint64                    `json:"contractRevision,omitempty"`
	PreviousRevision uint64                    `json:"previousContractRevision,omitempty"`
	OfferID          string                    `json:"offerId,omitempty"`
	Candidates       []protocol.OfferCandidate `json:"candidates,omitempty"`
	OfferExpiresAt   *protocol.Time            `json:"offerExpiresAt,omitempty"`
	StartWithinMs    uint64                    `json:"startWithinMs,omitempty"`
	// FencedOwnershipEpoch is the expired ownership an offer or unblock
	// fenced before acting.
	FencedOwnershipEpoch *uint64                      `json:"fencedOwnershipEpoch,omitempty"`
	Ownership            *protocol.OwnershipGrant     `json:"ownership,omitempty"`
	RenewedAcceptance    bool                         `json:"renewedAcceptance,omitempty"`
	ScheduleDisclosure   *protocol.ScheduleDisclosure `json:"scheduleDisclosure,omitempty"`
	Approval             *protocol.Approval           `json:"approval,omitempty"`
	Lease                *protocol.ExecutionLease     `json:"lease,omitempty"`
	// CapabilityToken is issued with every new or renewed lease.
	CapabilityToken      *protocol.CapabilityToken `json:"capabilityToken,omitempty"`
	LeaseID              string                    `json:"leaseId,omitempty"`
	ResumeFromCheckpoint string                    `json:"resumeFromCheckpointId,omitempty"`
	Checkpoint           *protocol.CheckpointRef   `json:"checkpoint,omitempty"`
	CheckpointReason     protocol.CheckpointReason `json:"checkpointReason,omitempty"`
	Progress             *protocol.Progress        `json:"progress,omitempty"`
	Blocker              *protocol.Resolution      `json:"blocker,omitempty"`
	Resolution           string                    `json:"resolution,omitempty"`
	Artifacts            []string                  `json:"artifacts,omitempty"`
	Evidence             []protocol.Evidence       `json:"evidence,omitempty"`
	Comment              string                    `json:"comment,omitempty"`
	Reason               string                    `json:"reason,omitempty"`
	ChildMissionID       string                    `json:"childMissionId,omitempty"`
	ChildApprovalID      string                    `json:"childApprovalId,omitempty"`
	Dependencies         []protocol.Dependency     `json:"dependencies,omitempty"`
}
