package protocol

import (
	"encoding/json"
	"strings"
	"time"
)

// Realistic values of every wire type, with every member set (optional
// ones included) so a round trip exercises each field.

var typesT0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// typesAt returns the wire time d after 2026-11-30T08:00:00Z.
func typesAt(d time.Duration) Time { return NewTime(typesT0.Add(d)) }

func typesAtPtr(d time.Duration) *Time { t := typesAt(d); return &t }

// typesPublicKey is 32 key bytes in unpadded base64url: the last of the 43
// characters carries two zero padding bits.
var typesPublicKey = strings.Repeat("B", 42) + "A"

// typesDigest returns a distinct sha256 digest for each seed.
func typesDigest(seed string) string {
	return "sha256:" + strings.Repeat(seed, 64/len(seed))
}

func typesSig(key string, at time.Duration) Signature {
	return Signature{
		Alg: SignatureAlgEd25519, KeyID: key, CreatedAt: typesAt(at),
		Value: strings.Repeat("A", 85) + "g",
	}
}

func typesBudgets() Budgets {
	return Budgets{
		Money: Float64(5), Tokens: Uint64(200000), ToolCalls: Uint64(100),
		ComputeSeconds: Float64(600), WallClockSeconds: Float64(3600), SideEffects: Uint64(10),
	}
}

func typesUsage() Usage {
	return Usage{Money: 0.42, Tokens: 1200, ToolCalls: 3, ComputeSeconds: 12.5, WallClockSeconds: 30, SideEffects: 1}
}

func typesContract() WorkContract {
	return WorkContract{
		ContractID: "wc-1", Revision: 2,
		Goal:               "Implement the login rate limiter",
		RequiredOutputs:    List[OutputSpec]{{Name: "patch", MediaType: "text/x-diff", Schema: "https://schemas.example/patch.json"}},
		AcceptanceCriteria: List[AcceptanceCriterion]{{ID: "ac-1", Description: "unit tests pass", EvidenceRequired: List[string]{"test-report"}}},
		Inputs:             List[InputRef]{{Artifact: typesDigest("a1"), Name: "spec"}},
		Dependencies:       List[Dependency]{{WorkItemID: "wi-1", Policy: DependencyVerified}},
		AllowedTools:       List[string]{"git", "go"},
		AllowedData:        List[string]{"repo:a"},
		AllowedOperations:  List[string]{"read", "write"},
		ResourceLimits:     ResourceLimits{CPU: Float64(1.5), MemoryMiB: Uint64(512), DiskMiB: Uint64(2048), GPUs: Uint64(1)},
		RequiredCapabilities: List[Capability]{
			{ID: "code.implement", Version: "1.x"},
		},
		Deadline:       typesAt(16 * time.Hour),
		Urgency:        UrgencyHigh,
		BusinessImpact: ImpactMedium,
		Budgets:        typesBudgets(),
		RetryPolicy: RetryPolicy{
			MaxAttempts: 3, Backoff: Backoff{InitialMs: 500, MaxMs: 30000, Multiplier: 2},
			AttemptTimeoutMs: 600000, CostLimit: 5,
		},
		Risk:  Risk{Class: RiskMedium, PreExecutionApproval: true},
		Notes: "keep the public API unchanged",
	}
}

func typesProgress() Progress {
	return Progress{
		Phase:               "implementation",
		MilestonesCompleted: List[string]{"design", "tests-written"},
		NextCheckpoint:      "after-handler",
		Blockers:            List[string]{"waiting for fixture data"},
		RevisedEstimate:     RevisedEstimate{CompletionAt: typesAt(3 * time.Hour), Confidence: 0.7},
		EvidenceRefs:        List[string]{typesDigest("e1")},
	}
}

func typesEvidence() Evidence {
	return Evidence{
		Subject: "wi-7", Criteria: List[string]{"ac-1"}, Method: "deterministic-test",
		Result: EvidencePass, Producer: Actor{Kind: ActorAgent, ID: "worker-1"},
		Timestamp: typesAt(2 * time.Hour), Artifacts: List[string]{typesDigest("b2")},
	}
}

func typesLease() ExecutionLease {
	return ExecutionLease{
		LeaseID: "lease-9", AgentID: "worker-1", SessionEpoch: 3, WorkItemID: "wi-7",
		OwnershipEpoch: 2, StartedAt: typesAt(time.Minute),
		Renewals:  List[Time]{typesAt(6 * time.Minute), typesAt(11*time.Minute + 250*time.Millisecond)},
		ExpiresAt: typesAt(16 * time.Minute),
	}
}

func typesSelectionBasis() SelectionBasis {
	return SelectionBasis{
		CapabilityMatches:     List[CapabilityMatch]{{ID: "code.implement", Required: "1.x", Offered: "1.4.0"}},
		AuthorizationEligible: true,
		AvailabilityEstimate:  AvailabilityEstimate{EarliestStart: typesAt(5 * time.Minute), Confidence: 0.8},
		ExpectedCost:          Budgets{Money: Float64(1.25), Tokens: Uint64(50000)},
		ReliabilityEvidence:   List[ReliabilityRecord]{{CapabilityID: "code.implement", Attempts: 20, Successes: 19}},
		PolicyRulesApplied:    List[string]{"org.max-active-per-worker"},
	}
}

func typesManifest() ArtifactManifest {
	return ArtifactManifest{
		ContentHash: typesDigest("c3"), MediaType: "text/x-diff", Schema: "https://schemas.example/patch.json",
		Producer:  ArtifactProducer{AgentID: "worker-1", AgentVersion: "0.3.1", AgentCardHash: typesDigest("d4")},
		MissionID: "mis-a", GroupID: "grp-a", WorkItemID: "wi-7",
		SourceArtifacts: List[string]{typesDigest("a1")},
		ToolVersions:    StringMap{"go": "1.26.8", "model:coder": "2026-10"},
		CreatedAt:       typesAt(2 * time.Hour), Classification: ClassInternal, Size: 4096,
		URI: "https://artifacts.example/sha256/c3", ArtifactDigest: typesDigest("f5"),
		Signature: typesSig("agent:worker-1#k1", 2*time.Hour),
	}
}

func typesAgentCard() AgentCard {
	return AgentCard{
		AgentID: "worker-1", AgentVersion: "0.3.1", OrganizationID: "org-1", DisplayName: "Worker One",
		Keys:           List[PublicKey]{{KeyID: "agent:worker-1#k1", Alg: SignatureAlgEd25519, PublicKey: typesPublicKey}},
		Capabilities:   List[Capability]{{ID: "code.implement", Version: "1.4.0"}},
		Roles:          List[Role]{RoleWorker, RoleReviewer},
		MaxConcurrency: 4, IssuedAt: typesAt(-24 * time.Hour),
		Extensions: Extensions{"urn:example:ext:gpu": {Critical: true, Data: json.RawMessage(`{"model":"L4","count":1}`)}},
		Signature:  typesSig("org:org-1#k1", -24*time.Hour),
	}
}

func typesMission() Mission {
	return Mission{
		MissionID: "mis-a", GroupID: "grp-a", Title: "Rate limiter", Objective: "Ship login rate limiting",
		State: MissionActive, Owner: Actor{Kind: ActorHuman, ID: "alice"}, PriorityClass: PriorityHigh,
		Coordinator: &CoordinatorLease{AgentID: "coord-1", CoordinatorEpoch: 2, LeaseExpiresAt: typesAt(time.Hour)},
		Budgets:     &Budgets{Money: Float64(50)},
		Parent:      &ParentLink{MissionID: "mis-p", GroupID: "grp-p", WorkItemID: "wi-p", OnChildFailure: ChildFailureBlock},
		FollowUpOf:  "mis-0", CreatedAt: typesAt(-time.Hour), Revision: 4,
	}
}

func typesMembership() Membership {
	return Membership{
		GroupID: "grp-a", Principal: Actor{Kind: ActorAgent, ID: "worker-1"}, Roles: List[Role]{RoleWorker},
		MembershipEpoch: 1, State: MembershipEnded, JoinedAt: typesAt(-time.Hour), EndedAt: typesAtPtr(time.Hour),
		Delegations: []Delegation{{
			DelegationID: "del-1", Delegator: Actor{Kind: ActorAgent, ID: "coord-1"},
			Delegate: Actor{Kind: ActorAgent, ID: "worker-1"}, CommandTypes: List[string]{string(CmdWorkAuthorize)},
			WorkItemIDs: []string{"wi-7"}, ExpiresAt: typesAt(2 * time.Hour), ParentDelegationID: "del-0",
		}},
		Revision: 3,
	}
}

func typesWorkItem() WorkItem {
	return WorkItem{
		WorkItemID: "wi-7", MissionID: "mis-a", GroupID: "grp-a", State: WorkBlocked,
		Contract: typesContract(), Revision: 6,
		Offer:          &Offer{OfferID: "off-3", Candidates: List[string]{"worker-1", "worker-2"}, ExpiresAt: typesAt(10 * time.Minute)},
		Ownership:      &OwnershipGrant{WorkItemID: "wi-7", OwnerAgentID: "worker-1", OwnershipEpoch: 2, StartDeadline: typesAt(20 * time.Minute)},
		Lease:          func() *ExecutionLease { l := typesLease(); return &l }(),
		Blocker:        &Resolution{Kind: ResolutionClarification, Detail: "which endpoint?"},
		Checkpoint:     &CheckpointRef{CheckpointID: "cp-2", StateDigest: typesDigest("9a"), At: typesAt(30 * time.Minute)},
		ChildMissionID: "mis-c", Attempts: 1,
		CreatedAt: typesAt(-time.Hour), UpdatedAt: typesAt(30 * time.Minute),
	}
}

func typesApproval() Approval {
	return Approval{
		ApprovalID: "apr-1", Kind: ApprovalExecution, MissionID: "mis-a", GroupID: "grp-a",
		WorkItemID: "wi-7", ContractRevision: Uint64(2), Approver: Actor{Kind: ActorHuman, ID: "alice"},
		Decision: DecisionApproved, Comment: "go ahead", DecidedAt: typesAt(time.Minute), ExpiresAt: typesAtPtr(time.Hour),
	}
}

func typesSnapshot() GroupSnapshot {
	return GroupSnapshot{
		SnapshotID: "snap-1", GroupID: "grp-a", Sequence: 420, LastEventID: "evt-420",
		CreatedAt: typesAt(5 * time.Hour), CreatedBy: "authority-1", Mission: typesMission(),
		Memberships: List[Membership]{typesMembership()}, WorkItems: List[WorkItem]{typesWorkItem()},
		Approvals: List[Approval]{typesApproval()}, Artifacts: List[string]{typesDigest("c3")},
		PolicyLogDigest: typesDigest("7b"), Signature: typesSig("authority-1#k1", 5*time.Hour),
	}
}

func typesGrant() CooperationOverrideGrant {
	return CooperationOverrideGrant{
		GrantID: "ovr-1", MissionID: "mis-a", GroupID: "grp-a", Policy: "max-active-work-items",
		Grantee: Actor{Kind: ActorAgent, ID: "coord-1"}, TargetCommandType: CmdWorkAuthorize,
		TargetActionID: "act-77", Reason: "release deadline", Approver: Actor{Kind: ActorHuman, ID: "alice"},
		GrantedAt: typesAt(time.Minute), ExpiresAt: typesAt(time.Hour),
	}
}

func typesCommand() Command {
	return Command{
		ActionID: "act-01J", ProtocolVersion: Version, Actor: Actor{Kind: ActorAgent, ID: "worker-1"},
		Type: CmdWorkAcceptOffer, GroupID: "grp-a",
		SessionEpoch: Uint64(3), MembershipEpoch: Uint64(1), CoordinatorEpoch: Uint64(2), ExpectedRevision: Uint64(7),
		CooperationOverrideGrantID: "ovr-1", CorrelationID: "mis-a", IssuedAt: typesAt(0),
		Payload: json.RawMessage(`{"workItemId":"wi-7","offerId":"off-3","contractRevision":2,"scheduleDisclosure":` +
			`{"estimatedStartWindow":{"from":"2026-11-30T08:01:00Z","to":"2026-11-30T08:05:00Z"},` +
			`"estimatedCompletion":"2026-11-30T09:00:00Z","confidence":0.5,"capacityState":"available","computedAt":"2026-11-30T08:00:00Z"}}`),
		Extensions: Extensions{OfflineExtensionURI: {Critical: true, Data: json.RawMessage(
			`{"agentId":"worker-1","groupId":"grp-a","workItemId":"wi-7","originalSessionEpoch":2,"ownershipEpoch":2,` +
				`"historicalLeaseId":"lease-9","disconnectedAt":"2026-11-30T07:50:00Z","bufferedAt":"2026-11-30T07:55:00.250Z",` +
				`"graceDeadline":"2026-11-30T08:05:00Z","historicalLeaseExpiresAt":"2026-11-30T08:01:00Z",` +
				`"usageDelta":{"money":0.42,"tokens":1200,"toolCalls":3,"computeSeconds":12.5,"wallClockSeconds":30,"sideEffects":0}}`)}},
		Signature: typesSig("agent:worker-1#k1", 0),
	}
}

func typesEvent() Event {
	return Event{
		EventID: "evt-42", GroupID: "grp-a", Sequence: Uint64(42),
		Aggregate: &Aggregate{Kind: AggregateWorkItem, ID: "wi-7"}, Revision: Uint64(5),
		Type: EvtWorkOfferAccepted, Actor: Actor{Kind: ActorAgent, ID: "worker-1"},
		CausationID: "act-01J", CorrelationID: "mis-a", OccurredAt: typesAt(120 * time.Millisecond),
		AcceptedBy: "authority-1", Payload: json.RawMessage(`{"workItemId":"wi-7","state":"queued","offerId":"off-3","contractRevision":2,` +
			`"ownership":{"workItemId":"wi-7","ownerAgentId":"worker-1","ownershipEpoch":2,"startDeadline":"2026-11-30T08:15:00Z"}}`),
		Extensions: Extensions{"urn:example:ext:trace": {Data: json.RawMessage(`{"spanId":"b7ad6b7169203331"}`)}},
		Signature:  typesSig("authority-1#k1", 120*time.Millisecond),
	}
}

// typesExample pairs a value with the members a filled check may find zero,
// by Go field path, because the value shows one of two exclusive forms.
type typesExample struct {
	name     string
	value    any
	zeroOKAt []string
}

func typesObjectExamples() []typesExample {
	ev := typesEvent()
	cmd := typesCommand()
	return []typesExample{
		{name: "Actor", value: Actor{Kind: ActorService, ID: "authority-1"}},
		{name: "Signature", value: typesSig("agent:w1#k1", 0)},
		{name: "Extension", value: Extension{Critical: true, Data: json.RawMessage(`[1,"x",null]`)}},
		{name: "Command", value: cmd},
		{name: "Event", value: ev, zeroOKAt: []string{"Extensions.Critical"}}, // relayed ones are never critical
		{name: "Receipt", value: Receipt{ActionID: "act-01J", Events: List[EventRef]{{EventID: "evt-42", GroupID: "grp-a", Sequence: Uint64(42)}}}},
		{name: "HelloClient", value: Hello{
			Type: FrameHello, FrameID: "f-1", ProtocolVersions: []string{Version}, AgentID: "worker-1", SessionEpoch: 3,
			Proof: &HelloProof{AgentID: "worker-1", SessionEpoch: 3, Nonce: "n0nce-abcdefghijkl", IssuedAt: typesAt(0), Signature: typesSig("agent:worker-1#k1", 0)},
		}, zeroOKAt: []string{"ProtocolVersion", "ServerTime", "Groups"}},
		{name: "HelloServer", value: Hello{
			Type: FrameHello, FrameID: "f-2", SessionEpoch: 3, ProtocolVersion: Version, ServerTime: typesAtPtr(time.Second), Groups: []string{"grp-a"},
		}, zeroOKAt: []string{"ProtocolVersions", "AgentID", "Proof"}},
		{name: "Subscribe", value: Subscribe{Type: FrameSubscribe, FrameID: "f-3", Groups: List[GroupPosition]{{
			GroupID: "grp-a", AfterSequence: 41,
			Filter: &SubscribeFilter{Types: []EventType{EvtWorkOfferCreated}, WorkItemIDs: []string{"wi-7"}},
		}}}},
		{name: "CommandFrame", value: CommandFrame{Type: FrameCommand, FrameID: "f-4", Command: &cmd}},
		{name: "EventFrame", value: EventFrame{Type: FrameEvent, FrameID: "f-5", Event: &ev}, zeroOKAt: []string{"Event.Extensions.Critical"}},
		{name: "AckServer", value: AckFrame{Type: FrameAck, FrameID: "f-6", InReplyTo: "f-4",
			Receipt: &Receipt{ActionID: "act-01J", Events: List[EventRef]{{EventID: "evt-42", GroupID: "grp-a", Sequence: Uint64(42)}}},
		}, zeroOKAt: []string{"Cursors"}},
		{name: "AckClient", value: AckFrame{Type: FrameAck, FrameID: "f-7", Cursors: []Cursor{{GroupID: "grp-a", Sequence: 42}}},
			zeroOKAt: []string{"InReplyTo", "Receipt"}},
		{name: "Ping", value: Ping{Type: FramePing, FrameID: "f-8", Nonce: "n0nce-abcdefghijkl", Reply: true, Presence: &PresenceRecord{
			AgentID: "worker-1", SessionEpoch: 3, CapacityState: CapacityConstrained, MaxConcurrency: 4,
			ActiveSlots: 3, QueuedWorkItems: 7, ObservedAt: typesAt(time.Second),
		}}},
		{name: "ErrorFrame", value: ErrorFrame{Type: FrameError, FrameID: "f-9", InReplyTo: "f-4", Error: &Error{
			Code: CodeRevisionConflict, Message: "expected revision 7, current 8", Retryable: false,
			InReplyTo: "f-4", ActionID: "act-01J", Details: map[string]any{"current": "8"},
		}}, zeroOKAt: []string{"Error.Retryable"}},
		{name: "Backpressure", value: Backpressure{Type: FrameBackpressure, FrameID: "f-10", GroupID: "grp-a", RetryAfterMs: 250}},
		{name: "GroupsFrame", value: GroupsFrame{Type: FrameGroups, FrameID: "f-11", Groups: []string{"grp-a", "grp-b"}}},
		{name: "WorkContract", value: typesContract()},
		{name: "OwnershipGrant", value: OwnershipGrant{WorkItemID: "wi-7", OwnerAgentID: "worker-1", OwnershipEpoch: 2, StartDeadline: typesAt(time.Hour)}},
		{name: "ExecutionLease", value: typesLease()},
		{name: "Progress", value: typesProgress()},
		{name: "ScheduleDisclosure", value: ScheduleDisclosure{
			EstimatedStartWindow: TimeWindow{From: typesAt(time.Minute), To: typesAt(10 * time.Minute)},
			EstimatedCompletion:  typesAt(time.Hour), Confidence: 0.6, CapacityState: CapacitySaturated, ComputedAt: typesAt(0),
		}},
		{name: "SelectionBasis", value: typesSelectionBasis()},
		{name: "AdmissionRejection", value: AdmissionRejection{Reason: RejectDeadline, Detail: "earliest completion after deadline"}},
		{name: "OfflineBinding", value: OfflineBinding{
			AgentID: "worker-1", GroupID: "grp-a", WorkItemID: "wi-7", OriginalSessionEpoch: 3, OwnershipEpoch: 2,
			HistoricalLeaseID: "lease-9", DisconnectedAt: typesAt(time.Minute), BufferedAt: typesAt(2 * time.Minute),
			GraceDeadline: typesAt(6 * time.Minute), HistoricalLeaseExpiresAt: typesAt(16 * time.Minute), UsageDelta: typesUsage(),
		}},
		{name: "Usage", value: typesUsage()},
		{name: "Budgets", value: typesBudgets()},
		{name: "WorkItem", value: typesWorkItem()},
		{name: "AgentCard", value: typesAgentCard()},
		{name: "PresenceRecord", value: PresenceRecord{AgentID: "worker-1", SessionEpoch: 3, CapacityState: CapacityAvailable,
			MaxConcurrency: 2, ActiveSlots: 1, QueuedWorkItems: 5, ObservedAt: typesAt(0)}},
		{name: "Mission", value: typesMission()},
		{name: "Group", value: Group{
			GroupID: "grp-a", OrganizationID: "org-1", MissionID: "mis-a", State: GroupArchived, CreatedAt: typesAt(-time.Hour),
			Revision: 9, LastSequence: 420, ExtensionProfiles: []ProfilePin{{URI: "urn:example:ext:gpu", Major: 1}},
			ArchivedAt: typesAtPtr(5 * time.Hour), SnapshotID: "snap-1",
		}},
		{name: "Membership", value: typesMembership()},
		{name: "Conversation", value: Conversation{ConversationID: "conv-1", GroupID: "grp-a",
			Subject: Subject{Kind: "workItem", ID: "wi-7"}, State: ConversationOpen, CreatedAt: typesAt(0)}},
		{name: "Message", value: Message{
			MessageID: "msg-1", GroupID: "grp-a", ConversationID: "conv-1", Author: Actor{Kind: ActorAgent, ID: "worker-1"},
			Text: "Which endpoint should be limited?", MediaType: MediaTextMarkdown, ReplyTo: "msg-0",
			Artifacts: []string{typesDigest("c3")}, State: MessageCorrected, PostedAt: typesAt(0), UpdatedAt: typesAtPtr(time.Minute), Revision: 2,
		}},
		{name: "ArtifactManifest", value: typesManifest()},
		{name: "Evidence", value: typesEvidence()},
		{name: "Approval", value: typesApproval()},
		{name: "ContextPackage", value: typesContextPackage()},
		{name: "GroupSnapshot", value: typesSnapshot()},
		{name: "SnapshotRef", value: SnapshotRef{SnapshotID: "snap-1", GroupID: "grp-a", Sequence: 420,
			Digest: typesDigest("5e"), URI: "https://authority.example/snapshots/snap-1"}},
		{name: "ExtensionProfile", value: ExtensionProfile{
			URI: "urn:example:ext:gpu", Version: "1.2.0", SchemaURI: "https://schemas.example/gpu.json", SchemaHash: typesDigest("3d"),
			RequiredCapabilities: List[Capability]{{ID: "gpu.run", Version: "1.x"}}, Critical: true,
			CommandTypes: []string{"ext.example.gpu.reserve"}, EventTypes: []string{"ext.example.gpu.reserved"},
			OrganizationID: "org-1", ApprovedAt: typesAt(-48 * time.Hour), Signature: typesSig("org:org-1#k1", -48*time.Hour),
		}},
		{name: "FirstAdmissionRecord", value: FirstAdmissionRecord{
			RecordID: "adm-2", OrganizationID: "org-1", AgentID: "worker-1", AgentCardHash: typesDigest("d4"),
			Key:        PublicKey{KeyID: "agent:worker-1#k1", Alg: SignatureAlgEd25519, PublicKey: typesPublicKey},
			AdmittedAt: typesAt(-24 * time.Hour), AdmittedBy: Actor{Kind: ActorService, ID: "registry"}, LogSequence: 2,
			PreviousRecordDigest: typesDigest("1f"), Signature: typesSig("org:org-1#k1", -24*time.Hour),
		}},
		{name: "CooperationOverrideGrant", value: typesGrant()},
	}
}

// typesPayloadExamples has one realistic payload per Command type.
func typesPayloadExamples() map[CommandType]any {
	worker := Actor{Kind: ActorAgent, ID: "worker-1"}
	card := typesAgentCard()
	return map[CommandType]any{
		CmdMissionCreate: CreateMissionPayload{MissionID: "mis-a", Title: "Rate limiter", Objective: "Ship it",
			PriorityClass: PriorityNormal, Budgets: &Budgets{Money: Float64(50)}, Deadline: typesAtPtr(72 * time.Hour),
			ExtensionProfiles: []ProfilePin{{URI: "urn:example:ext:gpu", Major: 1}}},
		CmdMissionAssignCoordinator: AssignCoordinatorPayload{MissionID: "mis-a", AgentID: "coord-1", LeaseDurationMs: 60000},
		CmdMissionRenewCoordinator:  RenewCoordinatorPayload{MissionID: "mis-a", LeaseDurationMs: 60000},
		CmdMissionSubmitForApproval: SubmitForApprovalPayload{MissionID: "mis-a", Summary: "all items verified",
			Artifacts: List[string]{typesDigest("c3")}, Evidence: List[Evidence]{typesEvidence()}},
		CmdMissionApprove:        ApproveMissionPayload{MissionID: "mis-a", ApprovalID: "apr-2", Comment: "ship it"},
		CmdMissionRequestChanges: RequestChangesPayload{MissionID: "mis-a", Changes: List[string]{"add metrics"}, Comment: "almost"},
		CmdMissionCancel:         CancelMissionPayload{MissionID: "mis-a", Reason: "superseded"},
		CmdMissionTerminate:      TerminateMissionPayload{MissionID: "mis-a", Reason: "budget exhausted"},
		CmdMissionCreateChild: CreateChildMissionPayload{MissionID: "mis-a", ParentWorkItemID: "wi-7", ChildMissionID: "mis-c",
			ChildGroupID: "grp-c", Title: "Fixture data", Objective: "Produce fixtures", OnChildFailure: ChildFailureFail,
			Budgets: &Budgets{Tokens: Uint64(10000)}},
		CmdMissionCreateFollowUp: CreateFollowUpPayload{MissionID: "mis-b", FollowUpOf: "mis-a", Title: "Phase 2",
			Objective: "Extend limits", PriorityClass: PriorityLow, Budgets: &Budgets{SideEffects: Uint64(0)}},
		CmdMembershipChange:          ChangeMembershipPayload{Principal: worker, Roles: List[Role]{RoleWorker, RoleReviewer}},
		CmdMembershipEnd:             EndMembershipPayload{Principal: worker, Reason: "rotated out"},
		CmdMembershipGrantDelegation: GrantDelegationPayload{DelegationID: "del-1", Delegate: worker, CommandTypes: List[string]{string(CmdWorkAuthorize)}, WorkItemIDs: []string{"wi-7"}, ExpiresAt: typesAt(time.Hour), ParentDelegationID: "del-0"},
		CmdMessagePost: PostMessagePayload{MessageID: "msg-1", ConversationID: "conv-1", Text: "Done?", MediaType: MediaTextPlain,
			ReplyTo: "msg-0", Artifacts: []string{typesDigest("c3")}},
		CmdMessageCorrect: CorrectMessagePayload{MessageID: "msg-1", Text: "Done.", Reason: "typo"},
		CmdMessageRetract: RetractMessagePayload{MessageID: "msg-1", Reason: "wrong thread"},
		CmdMessageRedact:  RedactMessagePayload{MessageID: "msg-1", Reason: "contained a secret"},
		CmdWorkPropose: ProposeWorkPayload{ProposalID: "prop-1", MissionID: "mis-a", Summary: "add a fixture generator",
			ParentWorkItemID: "wi-7", DraftContract: json.RawMessage(`{"goal":"fixtures","free":[1,2]}`)},
		CmdWorkAuthorize: AuthorizeWorkPayload{WorkItemID: "wi-8", MissionID: "mis-a", Contract: typesContract(), ProposalID: "prop-1", ConversationID: "conv-1"},
		CmdWorkOffer: OfferWorkPayload{WorkItemID: "wi-8", OfferID: "off-4", Contract: typesContract(),
			Candidates: List[OfferCandidate]{{AgentID: "worker-1", SelectionBasis: typesSelectionBasis()}},
			ExpiresAt:  typesAt(10 * time.Minute), StartWithinMs: Uint64(300000)},
		CmdWorkAcceptOffer: AcceptOfferPayload{WorkItemID: "wi-8", OfferID: "off-4", ContractRevision: 2, ScheduleDisclosure: ScheduleDisclosure{
			EstimatedStartWindow: TimeWindow{From: typesAt(time.Minute), To: typesAt(5 * time.Minute)},
			EstimatedCompletion:  typesAt(time.Hour), Confidence: 0.5, CapacityState: CapacityAvailable, ComputedAt: typesAt(0)}},
		CmdWorkStart:      StartWorkPayload{WorkItemID: "wi-8", OwnershipEpoch: 1, ResumeFromCheckpointID: "cp-2"},
		CmdWorkCheckpoint: CheckpointWorkPayload{WorkItemID: "wi-8", OwnershipEpoch: 1, LeaseID: "lease-9", CheckpointID: "cp-3", StateDigest: typesDigest("9a"), Progress: typesProgress(), Reason: CheckpointPreempted},
		CmdWorkBlock: BlockWorkPayload{WorkItemID: "wi-8", OwnershipEpoch: 1, LeaseID: "lease-9", CheckpointID: "cp-4", StateDigest: typesDigest("9b"),
			Resolution: Resolution{Kind: ResolutionDependency, Detail: "needs wi-1"}, Progress: func() *Progress { p := typesProgress(); return &p }()},
		CmdWorkUnblock: UnblockWorkPayload{WorkItemID: "wi-8", Resolution: "wi-1 verified"},
		CmdWorkSubmit: SubmitWorkPayload{WorkItemID: "wi-8", OwnershipEpoch: 1, LeaseID: "lease-9", Artifacts: List[string]{typesDigest("c3")},
			Evidence: List[Evidence]{typesEvidence()}, Progress: func() *Progress { p := typesProgress(); return &p }()},
		CmdWorkAcceptResult: AcceptResultPayload{WorkItemID: "wi-8", ContractRevision: 2, ReviewEvidence: []Evidence{typesEvidence()}, Comment: "good"},
		CmdWorkFail: FailWorkPayload{WorkItemID: "wi-8", Reason: "tests never pass", Evidence: List[Evidence]{typesEvidence()},
			OwnershipEpoch: Uint64(0), LeaseID: "lease-9"},
		CmdWorkCancel:                     CancelWorkPayload{WorkItemID: "wi-8", Reason: "descoped"},
		CmdArtifactPublish:                PublishArtifactPayload{Manifest: typesManifest(), OwnershipEpoch: Uint64(1), LeaseID: "lease-9"},
		CmdApprovalGrantExecution:         GrantExecutionPayload{ApprovalID: "apr-1", WorkItemID: "wi-8", ContractRevision: 2, Comment: "approved", ExpiresAt: typesAtPtr(time.Hour)},
		CmdPolicyGrantCooperationOverride: typesGrant(),
		CmdAgentCardRegister:              RegisterAgentCardPayload{AgentCard: card},
		CmdSessionOpen:                    OpenSessionPayload{AgentID: "worker-1", SessionEpoch: 4, AgentCardHash: typesDigest("d4")},
		CmdDependencyInsert:               InsertDependencyPayload{WorkItemID: "wi-8", ContractRevision: 3, Dependencies: List[Dependency]{{WorkItemID: "wi-9", Policy: DependencyTerminal}}},
		CmdLeaseRenew:                     RenewLeasePayload{WorkItemID: "wi-8", OwnershipEpoch: 1, LeaseID: "lease-9", Progress: typesProgress()},
		CmdResourceUsageRecord:            RecordResourceUsagePayload{WorkItemID: "wi-8", OwnershipEpoch: 1, LeaseID: "lease-9", UsageDelta: typesUsage()},
		CmdGroupArchive:                   ArchiveGroupPayload{Snapshot: typesSnapshot(), Reason: "mission approved"},
		CmdContextPublish:                 PublishContextPayload{Package: typesContextPackage()},
	}
}

func typesContextPackage() ContextPackage {
	return ContextPackage{
		PackageID: "ctx-1", Version: 2, PreviousVersion: &PackageVersionRef{Version: 1, Digest: typesDigest("0c")},
		Scope:        ContextScope{MissionID: "mis-a", GroupID: "grp-a", WorkItemID: "wi-7"},
		SourceEvents: EventRange{GroupID: "grp-a", FromSequence: 1, ToSequence: 42},
		Artifacts:    List[string]{typesDigest("a1")},
		Decisions:    List[Decision]{{Summary: "limit per IP", EventIDs: List[string]{"evt-12"}}},
		Constraints:  List[string]{"no new dependencies"}, OpenQuestions: List[string]{"burst size?"},
		Generator: Generator{AgentID: "coord-1", AgentVersion: "1.0.0"}, GeneratedAt: typesAt(time.Hour),
		Signature: typesSig("agent:coord-1#k1", time.Hour),
	}
}
