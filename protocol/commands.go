package protocol

// The one table of Command types: what protocol validation, the authority's
// state machines, in-process principals and coordinators must agree on
// about each type. Each column is read where it is enforced: Scope and
// CoordinatorEpoch by CheckCommandEpochs (spec 15.1), Sender by the Group
// state machine (package group) and the service, From by the Group state
// machine's transition guards; Payload by PayloadFor.

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
	SenderAnyHuman            Sender = "human"                     // any human principal (creates a Mission)
	SenderOwner               Sender = "owner"                     // the MissionOwner
	SenderOwnerOrPolicy       Sender = "owner|policy"              // the MissionOwner or an Organization policy service
	SenderCoordinator         Sender = "coordinator"               // the agent holding the coordinator lease, or its delegate
	SenderCoordinatorOrOwner  Sender = "coordinator|owner"         // the coordinator or the MissionOwner
	SenderCoordinatorOrPolicy Sender = "coordinator|policy"        // the coordinator or an Organization policy service
	SenderWorker              Sender = "worker"                    // an agent: a candidate, or the owner with its lease
	SenderWorkerOrCoordinator Sender = "worker|coordinator|policy" // the lease holder, or the coordinator or policy deciding
	SenderApprover            Sender = "approver"                  // a human or policy service granting execution
	SenderMember              Sender = "member"                    // any active member (messages, proposals, artifacts, usage)
	SenderAgent               Sender = "agent"                     // an agent for itself (Organization bootstrap)
)

// CommandRule is one row of Commands.
type CommandRule struct {
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
// ones); PayloadFor gives each row's payload type.
var Commands = map[CommandType]CommandRule{
	CmdMissionCreate:            {Scope: ScopeNewGroup, CoordinatorEpoch: EpochNever, Sender: SenderAnyHuman, Aggregate: AggregateMission},
	CmdMissionCreateFollowUp:    {Scope: ScopeNewGroup, CoordinatorEpoch: EpochNever, Sender: SenderAnyHuman, Aggregate: AggregateMission},
	CmdMissionAssignCoordinator: {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwnerOrPolicy, Aggregate: AggregateMission, MissionFrom: live},
	CmdMissionRenewCoordinator:  {Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateMission, MissionFrom: live},
	CmdMissionSubmitForApproval: {Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateMission, MissionFrom: live},
	CmdMissionApprove:           {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwner, Aggregate: AggregateMission, MissionFrom: []MissionState{MissionAwaitingApproval}},
	CmdMissionRequestChanges:    {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwner, Aggregate: AggregateMission, MissionFrom: []MissionState{MissionAwaitingApproval}},
	CmdMissionCancel:            {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwner, Aggregate: AggregateMission, MissionFrom: open},
	CmdMissionTerminate:         {Scope: ScopeGroup, CoordinatorEpoch: EpochForAgents, Sender: SenderCoordinatorOrPolicy, Aggregate: AggregateMission, MissionFrom: open},
	CmdMissionCreateChild:       {Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateMission, MissionFrom: live, WorkFrom: []WorkItemState{WorkOpen, WorkOffered, WorkQueued, WorkActive, WorkBlocked}},

	CmdMembershipChange:          {Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinatorOrOwner, Aggregate: AggregateMembership},
	CmdMembershipEnd:             {Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinatorOrOwner, Aggregate: AggregateMembership},
	CmdMembershipGrantDelegation: {Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateMembership},

	CmdMessagePost:    {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateMessage},
	CmdMessageCorrect: {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateMessage},
	CmdMessageRetract: {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateMessage},
	CmdMessageRedact:  {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateMessage},

	CmdWorkPropose:            {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateWorkItem},
	CmdWorkAuthorize:          {Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinator, Aggregate: AggregateWorkItem},
	CmdWorkOffer:              {Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinator, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkOpen, WorkOffered, WorkQueued, WorkActive, WorkBlocked, WorkFailed}},
	CmdWorkAcceptOffer:        {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkOffered, WorkQueued, WorkBlocked}},
	CmdApprovalGrantExecution: {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderApprover, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkQueued}},
	CmdWorkStart:              {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkQueued}},
	CmdWorkCheckpoint:         {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: active},
	CmdWorkBlock:              {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: active},
	CmdWorkUnblock:            {Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinatorOrOwner, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkBlocked}},
	CmdWorkSubmit:             {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: active},
	CmdWorkAcceptResult:       {Scope: ScopeGroup, CoordinatorEpoch: EpochRequired, Sender: SenderCoordinator, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkSubmitted}},
	CmdWorkFail:               {Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderWorkerOrCoordinator, Aggregate: AggregateWorkItem, WorkFrom: unfinished},
	CmdWorkCancel:             {Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinatorOrOwner, Aggregate: AggregateWorkItem, WorkFrom: unfinished},
	CmdLeaseRenew:             {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem, WorkFrom: active},
	CmdDependencyInsert:       {Scope: ScopeGroup, CoordinatorEpoch: EpochOnLease, Sender: SenderCoordinatorOrPolicy, Aggregate: AggregateWorkItem, WorkFrom: []WorkItemState{WorkOpen, WorkOffered, WorkQueued, WorkBlocked, WorkFailed}},
	CmdResourceUsageRecord:    {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderWorker, Aggregate: AggregateWorkItem},

	CmdArtifactPublish:                {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderMember, Aggregate: AggregateArtifact},
	CmdPolicyGrantCooperationOverride: {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwnerOrPolicy, Aggregate: AggregatePolicy},
	CmdGroupArchive:                   {Scope: ScopeGroup, CoordinatorEpoch: EpochNever, Sender: SenderOwnerOrPolicy, Aggregate: AggregateGroup, MissionFrom: []MissionState{MissionApproved, MissionCancelled, MissionTerminated}},

	CmdAgentCardRegister: {Scope: ScopeOrganization, CoordinatorEpoch: EpochNever, Sender: SenderAgent},
	CmdSessionOpen:       {Scope: ScopeOrganization, CoordinatorEpoch: EpochNever, Sender: SenderAgent},
}

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
