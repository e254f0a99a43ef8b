package protocol

// Version is the only wire protocolVersion this implementation speaks.
const Version = "0.1"

// CommandType names a Command (spec 15.1).
type CommandType string

// Core Command types (spec 15.1).
const (
	CmdMissionCreate                  CommandType = "mission.create"
	CmdMissionAssignCoordinator       CommandType = "mission.assign_coordinator"
	CmdMissionRenewCoordinator        CommandType = "mission.renew_coordinator"
	CmdMissionSubmitForApproval       CommandType = "mission.submit_for_approval"
	CmdMissionApprove                 CommandType = "mission.approve"
	CmdMissionRequestChanges          CommandType = "mission.request_changes"
	CmdMissionCancel                  CommandType = "mission.cancel"
	CmdMissionTerminate               CommandType = "mission.terminate"
	CmdMissionCreateChild             CommandType = "mission.create_child"
	CmdMissionCreateFollowUp          CommandType = "mission.create_follow_up"
	CmdMembershipChange               CommandType = "membership.change"
	CmdMembershipEnd                  CommandType = "membership.end"
	CmdMembershipGrantDelegation      CommandType = "membership.grant_delegation"
	CmdMessagePost                    CommandType = "message.post"
	CmdMessageCorrect                 CommandType = "message.correct"
	CmdMessageRetract                 CommandType = "message.retract"
	CmdMessageRedact                  CommandType = "message.redact"
	CmdWorkPropose                    CommandType = "work.propose"
	CmdWorkAuthorize                  CommandType = "work.authorize"
	CmdWorkOffer                      CommandType = "work.offer"
	CmdWorkAcceptOffer                CommandType = "work.accept_offer"
	CmdWorkStart                      CommandType = "work.start"
	CmdWorkCheckpoint                 CommandType = "work.checkpoint"
	CmdWorkBlock                      CommandType = "work.block"
	CmdWorkUnblock                    CommandType = "work.unblock"
	CmdWorkSubmit                     CommandType = "work.submit"
	CmdWorkAcceptResult               CommandType = "work.accept_result"
	CmdWorkFail                       CommandType = "work.fail"
	CmdWorkCancel                     CommandType = "work.cancel"
	CmdArtifactPublish                CommandType = "artifact.publish"
	CmdApprovalGrantExecution         CommandType = "approval.grant_execution"
	CmdPolicyGrantCooperationOverride CommandType = "policy.grant_cooperation_override"
)

// Organization-owned ext.missionweaveprotocol.* Command types of the
// reference core (spec 15.1). The spec names their purpose, not all their
// names; the names without a spelling in the spec are ours (docs/design.md).
const (
	CmdAgentCardRegister   CommandType = "ext.missionweaveprotocol.registry.agent_card_register"
	CmdSessionOpen         CommandType = "ext.missionweaveprotocol.identity.session_open"
	CmdDependencyInsert    CommandType = "ext.missionweaveprotocol.core.dependency_insert"
	CmdLeaseRenew          CommandType = "ext.missionweaveprotocol.core.lease_renew"
	CmdResourceUsageRecord CommandType = "ext.missionweaveprotocol.core.resource_usage_record"
	CmdGroupArchive        CommandType = "ext.missionweaveprotocol.core.group_archive"
	// CmdContextPublish publishes a version of a Context Package (spec
	// 13.3, which names no command for it).
	CmdContextPublish CommandType = "ext.missionweaveprotocol.core.context_publish"
)

// CoreCommandTypes lists the 32 core Command types of spec 15.1.
var CoreCommandTypes = []CommandType{
	CmdMissionCreate, CmdMissionAssignCoordinator, CmdMissionRenewCoordinator,
	CmdMissionSubmitForApproval, CmdMissionApprove, CmdMissionRequestChanges,
	CmdMissionCancel, CmdMissionTerminate, CmdMissionCreateChild,
	CmdMissionCreateFollowUp, CmdMembershipChange, CmdMembershipEnd,
	CmdMembershipGrantDelegation, CmdMessagePost, CmdMessageCorrect,
	CmdMessageRetract, CmdMessageRedact, CmdWorkPropose, CmdWorkAuthorize,
	CmdWorkOffer, CmdWorkAcceptOffer, CmdWorkStart, CmdWorkCheckpoint,
	CmdWorkBlock, CmdWorkUnblock, CmdWorkSubmit, CmdWorkAcceptResult,
	CmdWorkFail, CmdWorkCancel, CmdArtifactPublish, CmdApprovalGrantExecution,
	CmdPolicyGrantCooperationOverride,
}

// ExtCommandTypes lists the ext.missionweaveprotocol.* Command types.
var ExtCommandTypes = []CommandType{
	CmdAgentCardRegister, CmdSessionOpen, CmdDependencyInsert, CmdLeaseRenew,
	CmdResourceUsageRecord, CmdGroupArchive, CmdContextPublish,
}

// EventType names an Event (spec 15.2).
type EventType string

// Core Event types (spec 15.2).
const (
	EvtMissionCreated                   EventType = "mission.created"
	EvtMissionCoordinatorAssigned       EventType = "mission.coordinator.assigned"
	EvtMissionCoordinatorRenewed        EventType = "mission.coordinator.renewed"
	EvtMissionSubmittedForApproval      EventType = "mission.submitted_for_approval"
	EvtMissionApproved                  EventType = "mission.approved"
	EvtMissionChangesRequested          EventType = "mission.changes_requested"
	EvtMissionCancelled                 EventType = "mission.cancelled"
	EvtMissionTerminated                EventType = "mission.terminated"
	EvtMissionChildCreated              EventType = "mission.child.created"
	EvtMissionFollowUpCreated           EventType = "mission.follow_up.created"
	EvtMembershipChanged                EventType = "membership.changed"
	EvtMembershipEnded                  EventType = "membership.ended"
	EvtMembershipDelegationGranted      EventType = "membership.delegation.granted"
	EvtMessagePosted                    EventType = "message.posted"
	EvtMessageCorrected                 EventType = "message.corrected"
	EvtMessageRetracted                 EventType = "message.retracted"
	EvtMessageRedacted                  EventType = "message.redacted"
	EvtWorkProposed                     EventType = "work.proposed"
	EvtWorkAuthorized                   EventType = "work.authorized"
	EvtWorkOfferCreated                 EventType = "work.offer.created"
	EvtWorkOfferAccepted                EventType = "work.offer.accepted"
	EvtWorkContractRevised              EventType = "work.contract.revised"
	EvtWorkStarted                      EventType = "work.started"
	EvtWorkProgressed                   EventType = "work.progressed"
	EvtWorkCheckpointed                 EventType = "work.checkpointed"
	EvtWorkBlocked                      EventType = "work.blocked"
	EvtWorkUnblocked                    EventType = "work.unblocked"
	EvtWorkSubmitted                    EventType = "work.submitted"
	EvtWorkResultAccepted               EventType = "work.result.accepted"
	EvtWorkFailed                       EventType = "work.failed"
	EvtWorkCancelled                    EventType = "work.cancelled"
	EvtArtifactPublished                EventType = "artifact.published"
	EvtApprovalExecutionGranted         EventType = "approval.execution.granted"
	EvtPolicyCooperationOverrideGranted EventType = "policy.cooperation_override.granted"
	EvtGroupSnapshotCreated             EventType = "group.snapshot.created"
	EvtGroupArchived                    EventType = "group.archived"
)

// ext.missionweaveprotocol.* Event types.
const (
	EvtAgentCardRegistered   EventType = "ext.missionweaveprotocol.registry.agent_card_registered"
	EvtSessionOpened         EventType = "ext.missionweaveprotocol.identity.session_opened"
	EvtResourceUsageRecorded EventType = "ext.missionweaveprotocol.core.resource_usage_recorded"
	// EvtCooperationOverrideConsumed records a grant consumed by the
	// accepted target command (spec 20: consumption goes to the policy
	// log, bound to the accepted event).
	EvtCooperationOverrideConsumed EventType = "ext.missionweaveprotocol.core.cooperation_override_consumed"
	// EvtContextPublished records an accepted Context Package version.
	EvtContextPublished EventType = "ext.missionweaveprotocol.core.context_published"
)

// CoreEventTypes lists the 36 core Event types of spec 15.2.
var CoreEventTypes = []EventType{
	EvtMissionCreated, EvtMissionCoordinatorAssigned, EvtMissionCoordinatorRenewed,
	EvtMissionSubmittedForApproval, EvtMissionApproved, EvtMissionChangesRequested,
	EvtMissionCancelled, EvtMissionTerminated, EvtMissionChildCreated,
	EvtMissionFollowUpCreated, EvtMembershipChanged, EvtMembershipEnded,
	EvtMembershipDelegationGranted, EvtMessagePosted, EvtMessageCorrected,
	EvtMessageRetracted, EvtMessageRedacted, EvtWorkProposed, EvtWorkAuthorized,
	EvtWorkOfferCreated, EvtWorkOfferAccepted, EvtWorkContractRevised,
	EvtWorkStarted, EvtWorkProgressed, EvtWorkCheckpointed, EvtWorkBlocked,
	EvtWorkUnblocked, EvtWorkSubmitted, EvtWorkResultAccepted, EvtWorkFailed,
	EvtWorkCancelled, EvtArtifactPublished, EvtApprovalExecutionGranted,
	EvtPolicyCooperationOverrideGranted, EvtGroupSnapshotCreated, EvtGroupArchived,
}

// ExtEventTypes lists the ext.missionweaveprotocol.* Event types.
var ExtEventTypes = []EventType{EvtAgentCardRegistered, EvtSessionOpened, EvtResourceUsageRecorded, EvtCooperationOverrideConsumed, EvtContextPublished}

// OrganizationScoped reports whether events of type t omit groupId, sequence,
// aggregate and revision (spec 15.2).
func (t EventType) OrganizationScoped() bool {
	return t == EvtAgentCardRegistered || t == EvtSessionOpened
}

// FrameType names a WebSocket frame (spec 17, docs/wire.md).
type FrameType string

// The eight frame types of spec 17, and GROUPS, ours (docs/wire.md): the
// authority's notice of the Groups an agent is a member of.
const (
	FrameHello        FrameType = "HELLO"
	FrameSubscribe    FrameType = "SUBSCRIBE"
	FrameCommand      FrameType = "COMMAND"
	FrameEvent        FrameType = "EVENT"
	FrameAck          FrameType = "ACK"
	FramePing         FrameType = "PING"
	FrameError        FrameType = "ERROR"
	FrameBackpressure FrameType = "BACKPRESSURE"
	FrameGroups       FrameType = "GROUPS"
)

// OfflineExtensionURI is the critical binding extension of spec 11.5.
const OfflineExtensionURI = "urn:missionweaveprotocol:extension:bounded-offline-execution"
