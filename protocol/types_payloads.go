package protocol

import (
	"encoding/json"
	"reflect"
)

// Command payloads (docs/shapes.md). Envelope members (groupId, epochs,
// expectedRevision) are not repeated in them. Conventions shared by every
// type in this package: required arrays are List (nil marshals as []);
// optional arrays and maps are omitzero, so an absent member and an empty
// one stay apart; optional numbers that may legitimately be 0 are pointers.

// CreateMissionPayload is the payload of mission.create.
type CreateMissionPayload struct {
	MissionID     string        `json:"missionId"`
	Title         string        `json:"title"`
	Objective     string        `json:"objective"`
	PriorityClass PriorityClass `json:"priorityClass"`
	Budgets       *Budgets      `json:"budgets,omitempty"`
	Deadline      *Time         `json:"deadline,omitempty"`
	// ExtensionProfiles pins the extension profile versions the Group uses
	// (spec 18); each must be registered with the Organization.
	ExtensionProfiles []ProfilePin `json:"extensionProfiles,omitzero"`
}

// AssignCoordinatorPayload is the payload of mission.assign_coordinator.
type AssignCoordinatorPayload struct {
	MissionID       string `json:"missionId"`
	AgentID         string `json:"agentId"`
	LeaseDurationMs uint64 `json:"leaseDurationMs"`
}

// RenewCoordinatorPayload is the payload of mission.renew_coordinator.
type RenewCoordinatorPayload struct {
	MissionID       string `json:"missionId"`
	LeaseDurationMs uint64 `json:"leaseDurationMs"`
}

// SubmitForApprovalPayload is the payload of mission.submit_for_approval.
type SubmitForApprovalPayload struct {
	MissionID string         `json:"missionId"`
	Summary   string         `json:"summary"`
	Artifacts List[string]   `json:"artifacts"`
	Evidence  List[Evidence] `json:"evidence"`
}

// ApproveMissionPayload is the payload of mission.approve.
type ApproveMissionPayload struct {
	MissionID  string `json:"missionId"`
	ApprovalID string `json:"approvalId"`
	Comment    string `json:"comment,omitempty"`
}

// RequestChangesPayload is the payload of mission.request_changes.
type RequestChangesPayload struct {
	MissionID string       `json:"missionId"`
	Changes   List[string] `json:"changes"`
	Comment   string       `json:"comment,omitempty"`
}

// CancelMissionPayload is the payload of mission.cancel.
type CancelMissionPayload struct {
	MissionID string `json:"missionId"`
	Reason    string `json:"reason"`
}

// TerminateMissionPayload is the payload of mission.terminate.
type TerminateMissionPayload struct {
	MissionID string `json:"missionId"`
	Reason    string `json:"reason"`
}

// CreateChildMissionPayload is the payload of mission.create_child; MissionID
// is the parent.
type CreateChildMissionPayload struct {
	MissionID        string             `json:"missionId"`
	ParentWorkItemID string             `json:"parentWorkItemId"`
	ChildMissionID   string             `json:"childMissionId"`
	ChildGroupID     string             `json:"childGroupId"`
	Title            string             `json:"title"`
	Objective        string             `json:"objective"`
	OnChildFailure   ChildFailurePolicy `json:"onChildFailure"`
	Budgets          *Budgets           `json:"budgets,omitempty"`
}

// CreateFollowUpPayload is the payload of mission.create_follow_up; MissionID
// is the new Mission.
type CreateFollowUpPayload struct {
	MissionID     string        `json:"missionId"`
	FollowUpOf    string        `json:"followUpOf"`
	Title         string        `json:"title"`
	Objective     string        `json:"objective"`
	PriorityClass PriorityClass `json:"priorityClass"`
	Budgets       *Budgets      `json:"budgets,omitempty"`
}

// ChangeMembershipPayload is the payload of membership.change.
type ChangeMembershipPayload struct {
	Principal Actor      `json:"principal"`
	Roles     List[Role] `json:"roles"`
}

// EndMembershipPayload is the payload of membership.end.
type EndMembershipPayload struct {
	Principal Actor  `json:"principal"`
	Reason    string `json:"reason,omitempty"`
}

// GrantDelegationPayload is the payload of membership.grant_delegation.
type GrantDelegationPayload struct {
	DelegationID       string       `json:"delegationId"`
	Delegate           Actor        `json:"delegate"`
	CommandTypes       List[string] `json:"commandTypes"`
	WorkItemIDs        []string     `json:"workItemIds,omitzero"`
	ExpiresAt          Time         `json:"expiresAt"`
	ParentDelegationID string       `json:"parentDelegationId,omitempty"`
}

// PostMessagePayload is the payload of message.post.
type PostMessagePayload struct {
	MessageID      string   `json:"messageId"`
	ConversationID string   `json:"conversationId"`
	Text           string   `json:"text"`
	MediaType      string   `json:"mediaType,omitempty"`
	ReplyTo        string   `json:"replyTo,omitempty"`
	Artifacts      []string `json:"artifacts,omitzero"`
}

// CorrectMessagePayload is the payload of message.correct.
type CorrectMessagePayload struct {
	MessageID string `json:"messageId"`
	Text      string `json:"text"`
	Reason    string `json:"reason,omitempty"`
}

// RetractMessagePayload is the payload of message.retract.
type RetractMessagePayload struct {
	MessageID string `json:"messageId"`
	Reason    string `json:"reason,omitempty"`
}

// RedactMessagePayload is the payload of message.redact.
type RedactMessagePayload struct {
	MessageID string `json:"messageId"`
	Reason    string `json:"reason"`
}

// ProposeWorkPayload is the payload of work.propose. DraftContract is a
// free-form object kept as received.
type ProposeWorkPayload struct {
	ProposalID       string          `json:"proposalId"`
	MissionID        string          `json:"missionId"`
	Summary          string          `json:"summary"`
	ParentWorkItemID string          `json:"parentWorkItemId,omitempty"`
	DraftContract    json.RawMessage `json:"draftContract,omitempty"`
}

// AuthorizeWorkPayload is the payload of work.authorize.
type AuthorizeWorkPayload struct {
	WorkItemID     string       `json:"workItemId"`
	MissionID      string       `json:"missionId"`
	Contract       WorkContract `json:"contract"`
	ProposalID     string       `json:"proposalId,omitempty"`
	ConversationID string       `json:"conversationId,omitempty"`
}

// OfferWorkPayload is the payload of work.offer.
type OfferWorkPayload struct {
	WorkItemID    string               `json:"workItemId"`
	OfferID       string               `json:"offerId"`
	Contract      WorkContract         `json:"contract"`
	Candidates    List[OfferCandidate] `json:"candidates"`
	ExpiresAt     Time                 `json:"expiresAt"`
	StartWithinMs *uint64              `json:"startWithinMs,omitempty"`
}

// OfferCandidate is one agent an offer is made to, with the structured basis
// for choosing it (spec 10.3).
type OfferCandidate struct {
	AgentID        string         `json:"agentId"`
	SelectionBasis SelectionBasis `json:"selectionBasis"`
}

// AcceptOfferPayload is the payload of work.accept_offer.
type AcceptOfferPayload struct {
	WorkItemID         string             `json:"workItemId"`
	OfferID            string             `json:"offerId"`
	ContractRevision   uint64             `json:"contractRevision"`
	ScheduleDisclosure ScheduleDisclosure `json:"scheduleDisclosure"`
}

// StartWorkPayload is the payload of work.start.
type StartWorkPayload struct {
	WorkItemID             string `json:"workItemId"`
	OwnershipEpoch         uint64 `json:"ownershipEpoch"`
	ResumeFromCheckpointID string `json:"resumeFromCheckpointId,omitempty"`
}

// CheckpointReason says why a worker checkpointed.
type CheckpointReason string

// The checkpoint reasons.
const (
	CheckpointSafePoint CheckpointReason = "safe_point"
	CheckpointPreempted CheckpointReason = "preempted"
	CheckpointYield     CheckpointReason = "yield"
)

// CheckpointWorkPayload is the payload of work.checkpoint.
type CheckpointWorkPayload struct {
	WorkItemID     string           `json:"workItemId"`
	OwnershipEpoch uint64           `json:"ownershipEpoch"`
	LeaseID        string           `json:"leaseId"`
	CheckpointID   string           `json:"checkpointId"`
	StateDigest    string           `json:"stateDigest"`
	Progress       Progress         `json:"progress"`
	Reason         CheckpointReason `json:"reason"`
}

// BlockWorkPayload is the payload of work.block.
type BlockWorkPayload struct {
	WorkItemID     string     `json:"workItemId"`
	OwnershipEpoch uint64     `json:"ownershipEpoch"`
	LeaseID        string     `json:"leaseId"`
	CheckpointID   string     `json:"checkpointId"`
	StateDigest    string     `json:"stateDigest"`
	Resolution     Resolution `json:"resolution"`
	Progress       *Progress  `json:"progress,omitempty"`
}

// UnblockWorkPayload is the payload of work.unblock.
type UnblockWorkPayload struct {
	WorkItemID string `json:"workItemId"`
	Resolution string `json:"resolution"`
}

// SubmitWorkPayload is the payload of work.submit.
type SubmitWorkPayload struct {
	WorkItemID     string         `json:"workItemId"`
	OwnershipEpoch uint64         `json:"ownershipEpoch"`
	LeaseID        string         `json:"leaseId"`
	Artifacts      List[string]   `json:"artifacts"`
	Evidence       List[Evidence] `json:"evidence"`
	Progress       *Progress      `json:"progress,omitempty"`
}

// AcceptResultPayload is the payload of work.accept_result.
type AcceptResultPayload struct {
	WorkItemID       string     `json:"workItemId"`
	ContractRevision uint64     `json:"contractRevision"`
	ReviewEvidence   []Evidence `json:"reviewEvidence,omitzero"`
	Comment          string     `json:"comment,omitempty"`
}

// FailWorkPayload is the payload of work.fail. A worker reporting its own
// failure gives both OwnershipEpoch and LeaseID; a coordinator gives neither.
type FailWorkPayload struct {
	WorkItemID     string         `json:"workItemId"`
	Reason         string         `json:"reason"`
	Evidence       List[Evidence] `json:"evidence"`
	OwnershipEpoch *uint64        `json:"ownershipEpoch,omitempty"`
	LeaseID        string         `json:"leaseId,omitempty"`
}

// CancelWorkPayload is the payload of work.cancel.
type CancelWorkPayload struct {
	WorkItemID string `json:"workItemId"`
	Reason     string `json:"reason"`
}

// PublishArtifactPayload is the payload of artifact.publish. A worker gives
// both OwnershipEpoch and LeaseID.
type PublishArtifactPayload struct {
	Manifest       ArtifactManifest `json:"manifest"`
	OwnershipEpoch *uint64          `json:"ownershipEpoch,omitempty"`
	LeaseID        string           `json:"leaseId,omitempty"`
}

// GrantExecutionPayload is the payload of approval.grant_execution.
type GrantExecutionPayload struct {
	ApprovalID       string `json:"approvalId"`
	WorkItemID       string `json:"workItemId"`
	ContractRevision uint64 `json:"contractRevision"`
	Comment          string `json:"comment,omitempty"`
	ExpiresAt        *Time  `json:"expiresAt,omitempty"`
}

// GrantCooperationOverridePayload is the payload of
// policy.grant_cooperation_override: the grant itself.
type GrantCooperationOverridePayload = CooperationOverrideGrant

// RegisterAgentCardPayload is the payload of
// ext.missionweaveprotocol.registry.agent_card_register.
type RegisterAgentCardPayload struct {
	AgentCard AgentCard `json:"agentCard"`
}

// OpenSessionPayload is the payload of
// ext.missionweaveprotocol.identity.session_open.
type OpenSessionPayload struct {
	AgentID       string `json:"agentId"`
	SessionEpoch  uint64 `json:"sessionEpoch"`
	AgentCardHash string `json:"agentCardHash"`
}

// InsertDependencyPayload is the payload of
// ext.missionweaveprotocol.core.dependency_insert; ContractRevision is the
// new revision.
type InsertDependencyPayload struct {
	WorkItemID       string           `json:"workItemId"`
	ContractRevision uint64           `json:"contractRevision"`
	Dependencies     List[Dependency] `json:"dependencies"`
}

// PublishContextPayload is the payload of
// ext.missionweaveprotocol.core.context_publish: one signed version of a
// Context Package (spec 13.3).
type PublishContextPayload struct {
	Package ContextPackage `json:"package"`
}

// RenewLeasePayload is the payload of
// ext.missionweaveprotocol.core.lease_renew.
type RenewLeasePayload struct {
	WorkItemID     string   `json:"workItemId"`
	OwnershipEpoch uint64   `json:"ownershipEpoch"`
	LeaseID        string   `json:"leaseId"`
	Progress       Progress `json:"progress"`
}

// RecordResourceUsagePayload is the payload of
// ext.missionweaveprotocol.core.resource_usage_record.
type RecordResourceUsagePayload struct {
	WorkItemID     string `json:"workItemId"`
	OwnershipEpoch uint64 `json:"ownershipEpoch"`
	LeaseID        string `json:"leaseId"`
	UsageDelta     Usage  `json:"usageDelta"`
}

// ArchiveGroupPayload is the payload of
// ext.missionweaveprotocol.core.group_archive.
type ArchiveGroupPayload struct {
	Snapshot GroupSnapshot `json:"snapshot"`
	Reason   string        `json:"reason,omitempty"`
}

// PayloadFor returns a pointer to a new zero payload for Command type t, or
// nil for a type this implementation does not define (including other
// organizations' ext.* types, whose payloads are free-form).
func PayloadFor(t CommandType) any {
	r, ok := Commands[t]
	if !ok || r.Payload == nil {
		return nil
	}
	return reflect.New(r.Payload).Interface()
}
