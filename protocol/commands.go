package protocol

import "reflect"

// The one table of Command types: what protocol validation, the authority's
// state machines, in-process principals and coordinators must agree on
// about each type. Each column is read where it is enforced: Scope and
// CoordinatorEpoch by CheckCommandEpochs (spec 15.1), Sender by the Group
// state machine (package group) and the service, From by the Group state
// machine's transition guards; Payload by PayloadFor and every decoder of
// command payloads.

// CommandScope says where a Command acts.
type CommandScope string

// The scopes.
const (
	// ScopeOrganization: Organization bootstrap, no Group and no epochs.
	ScopeOrganization CommandScope = "organization"
	// ScopeNewGroup: creates the Group it names; no session, membership or
	// coordinator epoch exists yet.
	ScopeNewGroup CommandScope = "newGroup"
	// ScopeGroup: inside an existing Group, by a member.
	ScopeGroup CommandScope = "group"
)

// CoordinatorEpochRule says when a Command carries coordinatorEpoch.
type CoordinatorEpochRule string

// The coordinator epoch rules.
const (
	// EpochNever: authority never comes from the coordinator lease; an
	// agent may carry the epoch (it is ignored), a human or service may not.
	EpochNever CoordinatorEpochRule = "never"
	// EpochRequired: only the coordinator lease authorizes it, so an agent
	// must carry coordinatorEpoch and no human or service may send it.
	EpochRequired CoordinatorEpochRule = "required"
	// EpochForAgents: an agent acts on the coordinator lease and must
	// carry it; an Organization service acts by policy without one.
	EpochForAgents CoordinatorEpochRule = "forAgents"
	// EpochOnLease: the coordinator or someone else (the MissionOwner, the
	// owning worker) may send it; the coordinator acting on its lease
	// carries coordinatorEpoch, checked against the Mission (group).
	EpochOnLease CoordinatorEpochRule = "onLease"
)

// Sender is who may send a Command, decided against Group state.
type Sender string

// The senders.
const (
	SenderAnyHuman            Sender = "human"                         // any human principal (creates a Mission)
	SenderOwner               Sender = "owner"                         // the MissionOwner
	SenderOwnerOrPolicy       Sender = "owner or policy"               // the MissionOwner or an Organization policy service
	SenderPolicy              Sender = "policy"                        // an Organization policy service
	SenderCoordinator         Sender = "coordinator"                   // the agent holding the coordinator lease, or its delegate
	SenderCoordinatorOrOwner  Sender = "coordinator or owner"          // the coordinator or the MissionOwner
	SenderCoordinatorOrPolicy Sender = "coordinator or policy"         // the coordinator or an Organization policy service
	SenderWorker              Sender = "worker"                        // an agent: a candidate, or the owner with its lease
	SenderWorkerOrCoordinator Sender = "worker, coordinator or policy" // the lease holder (the owner of a queued item by epoch), or the coordinator or policy deciding
	SenderApprover            Sender = "approver"                      // a human or policy service granting execution
	SenderMember              Sender = "member"                        // any active member (messages, proposals, artifacts, usage)
	SenderAgent               Sender = "agent"                         // an agent for itself (Organization bootstrap)
	SenderAgentOrPolicy       Sender = "agent or policy"               // an agent for itself, or a policy service registering it for the Organization
)

// CommandRule is one row of Commands.
type CommandRule struct {
	// Payload is the Go type of the command's payload (PayloadFor).
	Payload          reflect.Type
	Scope            CommandScope
	CoordinatorEpoch CoordinatorEpochRule
	Sender           Sender
	// Aggregate is the kind of aggregate the command acts on ("" for
	// Organization commands).
	Aggregate AggregateKind
	// WorkFrom and MissionFrom list the WorkItem and Mission states the
	// command is allowed from (spec 10.2, docs/design.md §11); empty when
	// it is not a transition of that aggregate. mission.create_child has
	// both: the Mission's state and its parent WorkItem's.
	WorkFrom    []WorkItemState
	MissionFrom []MissionState
}

var (
	active     = []WorkItemState{WorkActive}
	unfinished = []WorkItemState{WorkOpen, WorkOffered, WorkQueued, WorkActive, WorkBlocked, WorkSubmitted}
	live       = []MissionState{MissionActive}
	open       = []MissionState{MissionActive, MissionAwaitingApproval}
)

// Commands is the rules table, one row per Command type this
// implementation defines (the 32 core types of spec 15.1 and the ext.*
// ones).
var Commands = map[CommandType]CommandRule{
	CmdMissionCreate:            {Payload: payload[CreateMissionPayload](), Scope: ScopeNewGroup, CoordinatorEpoch: EpochNever, Sender: SenderAnyHuman, Aggregate: AggregateMission},
	CmdMissionCreateFollowUp:    {Payload: payload[CreateFollowUpPayload](), Scope: ScopeNewGroup, CoordinatorEpoch: EpochNever, Sender: SenderAnyHuman, Aggregate: AggregateMission},
	CmdMissionAssignCoordinator: {Payload: payload[AssignCoordinatorPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwnerOrPolicy, Aggregate: AggregateMission, MissionFrom: live},
	CmdMissionRenewCoordinator:  {Payload: payload[RenewCoordinatorPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateMission, MissionFrom: live},
	CmdMissionSubmitForApproval: {Payload: payload[SubmitForApprovalPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateMission, MissionFrom: live},
	CmdMissionApprove:           {Payload: payload[ApproveMissionPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwner, Aggregate: AggregateMission, MissionFrom: []MissionState{MissionAwaitingApproval}},
	CmdMissionRequestChanges:    {Payload: payload[RequestChangesPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwner, Aggregate: AggregateMission, MissionFrom: []MissionState{MissionAwaitingApproval}},
	CmdMissionCancel:            {Payload: payload[CancelMissionPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwner, Aggregate: AggregateMission, MissionFrom: open},
	CmdMissionTerminate:         {Payload: payload[TerminateMissionPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochForAgents, Sender: SenderCoordinatorOrPolicy, Aggregate: AggregateMission, MissionFrom: open},
	CmdMissionCreateChild:       {Payload: payload[CreateChildMissionPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateMission, MissionFrom: live, WorkFrom: []WorkItemState{WorkOpen, WorkOffered, WorkQueued, WorkActive, WorkBlocked}},

	CmdMembershipChange:          {Payload: payload[ChangeMembershipPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinatorOrOwner, Aggregate: AggregateMembership},
	CmdMembershipEnd:             {Payload: payload[EndMembershipPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinatorOrOwner, Aggregate: AggregateMembership},
	CmdMembershipGrantDelegation: {Payload: payload[GrantDelegationPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateMembership},

	CmdMessagePost:    {Payload: payload[PostMessagePayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateMessage},
	CmdMessageCorrect: {Payload: payload[CorrectMessagePayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateMessage},
	CmdMessageRetract: {Payload: payload[RetractMessagePayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateMessage},
	CmdMessageRedact:  {Payload: payload[RedactMessagePayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateMessage},

	CmdWorkPropose:            {Payload: payload[ProposeWorkPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateWorkItem},
	CmdWorkAuthorize:          {Payload: payload[AuthorizeWorkPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinator, Aggregate: AggregateWorkItem},
	CmdWorkOffer:              {Payload: payload[OfferWorkPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinator, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkOpen, WorkOffered, WorkQueued, WorkActive, WorkBlocked, WorkFailed}},
	CmdWorkAcceptOffer:        {Payload: payload[AcceptOfferPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkOffered, WorkQueued, WorkBlocked}},
	CmdApprovalGrantExecution: {Payload: payload[GrantExecutionPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderApprover, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkQueued}},
	CmdWorkStart:              {Payload: payload[StartWorkPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkQueued}},
	CmdWorkCheckpoint:         {Payload: payload[CheckpointWorkPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: active},
	CmdWorkBlock:              {Payload: payload[BlockWorkPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: active},
	CmdWorkUnblock:            {Payload: payload[UnblockWorkPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinatorOrOwner, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkBlocked}},
	CmdWorkSubmit:             {Payload: payload[SubmitWorkPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: active},
	CmdWorkAcceptResult:       {Payload: payload[AcceptResultPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkSubmitted}},
	CmdWorkFail:               {Payload: payload[FailWorkPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderWorkerOrCoordinator, Aggregate: AggregateWorkItem, WorkFrom: unfinished},
	CmdWorkCancel:             {Payload: payload[CancelWorkPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinatorOrOwner, Aggregate: AggregateWorkItem, WorkFrom: unfinished},
	CmdLeaseRenew:             {Payload: payload[RenewLeasePayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: active},
	CmdDependencyInsert:       {Payload: payload[InsertDependencyPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinatorOrPolicy, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkOpen, WorkOffered, WorkQueued, WorkBlocked, WorkFailed}},
	CmdResourceUsageRecord:    {Payload: payload[RecordResourceUsagePayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem},

	CmdArtifactPublish:                {Payload: payload[PublishArtifactPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateArtifact},
	CmdPolicyGrantCooperationOverride: {Payload: payload[GrantCooperationOverridePayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwnerOrPolicy, Aggregate: AggregatePolicy},
	CmdContextPublish:                 {Payload: payload[PublishContextPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateContext, MissionFrom: live},
	CmdGroupArchive:                   {Payload: payload[ArchiveGroupPayload](), Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderPolicy, Aggregate: AggregateGroup, MissionFrom: []MissionState{MissionApproved, MissionCancelled, MissionTerminated}},

	CmdAgentCardRegister: {Payload: payload[RegisterAgentCardPayload](), Scope: ScopeOrganization, CoordinatorEpoch: EpochNever, Sender: SenderAgentOrPolicy},
	CmdSessionOpen:       {Payload: payload[OpenSessionPayload](), Scope: ScopeOrganization, CoordinatorEpoch: EpochNever, Sender: SenderAgent},
}

func payload[T any]() reflect.Type { return reflect.TypeFor[T]() }

// CarriesCoordinatorEpoch reports whether an agent acting as the Mission's
// coordinator puts coordinatorEpoch on a command of type t. In-process
// principals and coordinators use it to fill the envelope.
func CarriesCoordinatorEpoch(t CommandType) bool {
	switch Commands[t].CoordinatorEpoch {
	case EpochRequired, EpochForAgents, EpochOnLease:
		return true
	}
	return false
}

// MetricLabel is t as a metric label: the type itself when it is one of
// Commands, else "unknown", so a client sending made-up types cannot grow
// a metric's label set without bound.
func MetricLabel(t CommandType) string {
	if _, ok := Commands[t]; ok {
		return string(t)
	}
	return "unknown"
}
