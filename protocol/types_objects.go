package protocol

import (
	"encoding/json"
)

// PublicKey is an Ed25519 public key an agent or Organization signs with.
// PublicKey holds the unpadded base64url of the 32 key bytes.
type PublicKey struct {
	KeyID     string `json:"keyId"`
	Alg       string `json:"alg"`
	PublicKey string `json:"publicKey"`
}

// Role is a role a principal may hold in a Group.
type Role string

// The roles.
const (
	RoleMissionOwner Role = "missionOwner"
	RoleCoordinator  Role = "coordinator"
	RoleWorker       Role = "worker"
	RoleReviewer     Role = "reviewer"
	RoleObserver     Role = "observer"
)

// Known reports whether r is one of the five roles.
func (r Role) Known() bool {
	switch r {
	case RoleMissionOwner, RoleCoordinator, RoleWorker, RoleReviewer, RoleObserver:
		return true
	}
	return false
}

// Classification is a data classification of an Artifact.
type Classification string

// The classifications, least to most restricted.
const (
	ClassPublic       Classification = "public"
	ClassInternal     Classification = "internal"
	ClassConfidential Classification = "confidential"
	ClassRestricted   Classification = "restricted"
)

// Rank orders the classifications, least restricted first from 1; an
// unknown one is 0.
func (c Classification) Rank() int {
	switch c {
	case ClassPublic:
		return 1
	case ClassInternal:
		return 2
	case ClassConfidential:
		return 3
	case ClassRestricted:
		return 4
	}
	return 0
}

// AgentCard declares an agent: keys, capabilities, roles and execution slots
// (agent-card.schema.json). Its hash is the digest of the JCS bytes of the
// whole card, signature included.
type AgentCard struct {
	AgentID        string           `json:"agentId"`
	AgentVersion   string           `json:"agentVersion"`
	OrganizationID string           `json:"organizationId"`
	DisplayName    string           `json:"displayName"`
	Keys           List[PublicKey]  `json:"keys"`
	Capabilities   List[Capability] `json:"capabilities"`
	Roles          List[Role]       `json:"roles"`
	MaxConcurrency uint64           `json:"maxConcurrency"`
	IssuedAt       Time             `json:"issuedAt"`
	Extensions     Extensions       `json:"extensions,omitzero"`
	Signature      Signature        `json:"signature"`
}

// PresenceRecord reports an agent's current capacity (spec 11.1), carried in
// PING frames.
type PresenceRecord struct {
	AgentID         string        `json:"agentId"`
	SessionEpoch    uint64        `json:"sessionEpoch"`
	CapacityState   CapacityState `json:"capacityState"`
	MaxConcurrency  uint64        `json:"maxConcurrency"`
	ActiveSlots     uint64        `json:"activeSlots"`
	QueuedWorkItems uint64        `json:"queuedWorkItems"`
	ObservedAt      Time          `json:"observedAt"`
}

// MissionState is a state of the Mission state machine (docs/design.md §11, our
// stand-in for the unavailable spec 7.1).
type MissionState string

// The Mission states.
const (
	MissionActive           MissionState = "active"
	MissionAwaitingApproval MissionState = "awaiting_approval"
	MissionApproved         MissionState = "approved"
	MissionCancelled        MissionState = "cancelled"
	MissionTerminated       MissionState = "terminated"
)

// Known reports whether s is one of the five Mission states.
func (s MissionState) Known() bool {
	switch s {
	case MissionActive, MissionAwaitingApproval, MissionApproved, MissionCancelled, MissionTerminated:
		return true
	}
	return false
}

// Terminal reports whether no transition leaves s (only a follow-up Mission
// may link to it).
func (s MissionState) Terminal() bool {
	return s == MissionApproved || s == MissionCancelled || s == MissionTerminated
}

// ChildFailurePolicy says how a child Mission's failure reaches its parent
// WorkItem (spec 10.2).
type ChildFailurePolicy string

// The child failure policies.
const (
	ChildFailureBlock ChildFailurePolicy = "block"
	ChildFailureFail  ChildFailurePolicy = "fail"
)

// Mission is the authority's record of one Mission; its owner is always a
// human.
type Mission struct {
	MissionID     string            `json:"missionId"`
	GroupID       string            `json:"groupId"`
	Title         string            `json:"title"`
	Objective     string            `json:"objective"`
	State         MissionState      `json:"state"`
	Owner         Actor             `json:"owner"`
	PriorityClass PriorityClass     `json:"priorityClass"`
	Coordinator   *CoordinatorLease `json:"coordinator,omitempty"`
	Budgets       *Budgets          `json:"budgets,omitempty"`
	Parent        *ParentLink       `json:"parent,omitempty"`
	FollowUpOf    string            `json:"followUpOf,omitempty"`
	CreatedAt     Time              `json:"createdAt"`
	Revision      uint64            `json:"revision"`
}

// CoordinatorLease is the current coordinator and its fencing epoch.
type CoordinatorLease struct {
	AgentID          string `json:"agentId"`
	CoordinatorEpoch uint64 `json:"coordinatorEpoch"`
	LeaseExpiresAt   Time   `json:"leaseExpiresAt"`
}

// ParentLink ties a child Mission to the parent WorkItem it blocks.
type ParentLink struct {
	MissionID      string             `json:"missionId"`
	GroupID        string             `json:"groupId"`
	WorkItemID     string             `json:"workItemId"`
	OnChildFailure ChildFailurePolicy `json:"onChildFailure"`
}

// GroupState is the state of a Group.
type GroupState string

// The Group states.
const (
	GroupActive   GroupState = "active"
	GroupArchived GroupState = "archived"
)

// Group is the authority's record of one Group (one per Mission).
type Group struct {
	GroupID           string       `json:"groupId"`
	OrganizationID    string       `json:"organizationId"`
	MissionID         string       `json:"missionId"`
	State             GroupState   `json:"state"`
	CreatedAt         Time         `json:"createdAt"`
	Revision          uint64       `json:"revision"`
	LastSequence      uint64       `json:"lastSequence"`
	ExtensionProfiles []ProfilePin `json:"extensionProfiles,omitzero"`
	ArchivedAt        *Time        `json:"archivedAt,omitempty"`
	SnapshotID        string       `json:"snapshotId,omitempty"`
}

// ProfilePin fixes the compatible major version of an extension profile a
// Group uses (spec 18).
type ProfilePin struct {
	// URI is the profile's URI.
	URI string `json:"uri"`
	// Major is the major version of the profile the Group accepts.
	Major uint64 `json:"major"`
}

// MembershipState is the state of a Membership.
type MembershipState string

// The Membership states.
const (
	MembershipActive MembershipState = "active"
	MembershipEnded  MembershipState = "ended"
)

// Membership is a principal's roles in a Group, fenced by MembershipEpoch.
type Membership struct {
	GroupID         string          `json:"groupId"`
	Principal       Actor           `json:"principal"`
	Roles           List[Role]      `json:"roles"`
	MembershipEpoch uint64          `json:"membershipEpoch"`
	State           MembershipState `json:"state"`
	JoinedAt        Time            `json:"joinedAt"`
	EndedAt         *Time           `json:"endedAt,omitempty"`
	Delegations     []Delegation    `json:"delegations,omitzero"`
	Revision        uint64          `json:"revision"`
}

// Delegation lets Delegate issue CommandTypes on Delegator's authority until
// ExpiresAt; ParentDelegationID chains re-delegation (depth, cycle checks).
type Delegation struct {
	DelegationID       string       `json:"delegationId"`
	Delegator          Actor        `json:"delegator"`
	Delegate           Actor        `json:"delegate"`
	CommandTypes       List[string] `json:"commandTypes"`
	WorkItemIDs        []string     `json:"workItemIds,omitzero"`
	ExpiresAt          Time         `json:"expiresAt"`
	ParentDelegationID string       `json:"parentDelegationId,omitempty"`
}

// Subject names the Mission or WorkItem a Conversation is about.
type Subject struct {
	Kind string `json:"kind"` // "mission" or "workItem"
	ID   string `json:"id"`
}

// ConversationState is the state of a Conversation.
type ConversationState string

// The Conversation states.
const (
	ConversationOpen   ConversationState = "open"
	ConversationClosed ConversationState = "closed"
)

// Conversation is a thread of Messages about a Mission or WorkItem.
type Conversation struct {
	ConversationID string            `json:"conversationId"`
	GroupID        string            `json:"groupId"`
	Subject        Subject           `json:"subject"`
	State          ConversationState `json:"state"`
	CreatedAt      Time              `json:"createdAt"`
}

// MessageState is the state of a Message.
type MessageState string

// The Message states.
const (
	MessagePosted    MessageState = "posted"
	MessageCorrected MessageState = "corrected"
	MessageRetracted MessageState = "retracted"
	MessageRedacted  MessageState = "redacted"
)

// Message media types.
const (
	MediaTextPlain    = "text/plain"
	MediaTextMarkdown = "text/markdown"
)

// Message is conversation text. It never authorizes anything and has no
// member that changes other state (docs/design.md §11).
type Message struct {
	MessageID      string       `json:"messageId"`
	GroupID        string       `json:"groupId"`
	ConversationID string       `json:"conversationId"`
	Author         Actor        `json:"author"`
	Text           string       `json:"text"`
	MediaType      string       `json:"mediaType"`
	ReplyTo        string       `json:"replyTo,omitempty"`
	Artifacts      []string     `json:"artifacts,omitzero"`
	State          MessageState `json:"state"`
	PostedAt       Time         `json:"postedAt"`
	UpdatedAt      *Time        `json:"updatedAt,omitempty"`
	Revision       uint64       `json:"revision"`
}

// ArtifactManifest is the signed, content-addressed description of an
// Artifact (spec 13.1). ArtifactDigest, when present, is the digest of the
// JCS bytes of the manifest without that member (spec 22).
type ArtifactManifest struct {
	ContentHash     string           `json:"contentHash"`
	MediaType       string           `json:"mediaType"`
	Schema          string           `json:"schema"`
	Producer        ArtifactProducer `json:"producer"`
	MissionID       string           `json:"missionId"`
	GroupID         string           `json:"groupId"`
	WorkItemID      string           `json:"workItemId"`
	SourceArtifacts List[string]     `json:"sourceArtifacts"`
	ToolVersions    StringMap        `json:"toolVersions"`
	CreatedAt       Time             `json:"createdAt"`
	Classification  Classification   `json:"classification"`
	Size            uint64           `json:"size"`
	URI             string           `json:"uri"`
	ArtifactDigest  string           `json:"artifactDigest,omitempty"`
	Signature       Signature        `json:"signature"`
}

// ArtifactProducer identifies the agent, version and card that produced an
// Artifact.
type ArtifactProducer struct {
	AgentID       string `json:"agentId"`
	AgentVersion  string `json:"agentVersion"`
	AgentCardHash string `json:"agentCardHash"`
}

// StringMap is a required JSON object of strings: nil marshals as {}.
type StringMap map[string]string

// MarshalJSON writes {} for a nil map.
func (m StringMap) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(map[string]string(m))
}

// EvidenceResult is the outcome an Evidence record states.
type EvidenceResult string

// The evidence results.
const (
	EvidencePass         EvidenceResult = "pass"
	EvidenceFail         EvidenceResult = "fail"
	EvidenceInconclusive EvidenceResult = "inconclusive"
)

// CriterionFailure is the criterion id failure evidence is mapped to.
const CriterionFailure = "failure"

// Evidence maps a result to acceptance criteria (spec 13.2); it holds no
// private chain of thought.
type Evidence struct {
	Subject   string         `json:"subject"`
	Criteria  List[string]   `json:"criteria"`
	Method    string         `json:"method"`
	Result    EvidenceResult `json:"result"`
	Producer  Actor          `json:"producer"`
	Timestamp Time           `json:"timestamp"`
	Artifacts List[string]   `json:"artifacts"`
}

// ApprovalKind says what an Approval is for.
type ApprovalKind string

// The approval kinds.
const (
	ApprovalExecution ApprovalKind = "execution"
	ApprovalMission   ApprovalKind = "mission"
)

// ApprovalDecision is the approver's decision.
type ApprovalDecision string

// The approval decisions.
const (
	DecisionApproved         ApprovalDecision = "approved"
	DecisionChangesRequested ApprovalDecision = "changes_requested"
)

// Approval records a pre-execution gate (kind execution: WorkItemID and
// ContractRevision set) or a Mission approval decision.
type Approval struct {
	ApprovalID       string           `json:"approvalId"`
	Kind             ApprovalKind     `json:"kind"`
	MissionID        string           `json:"missionId"`
	GroupID          string           `json:"groupId"`
	WorkItemID       string           `json:"workItemId,omitempty"`
	ContractRevision *uint64          `json:"contractRevision,omitempty"`
	Approver         Actor            `json:"approver"`
	Decision         ApprovalDecision `json:"decision"`
	Comment          string           `json:"comment,omitempty"`
	DecidedAt        Time             `json:"decidedAt"`
	ExpiresAt        *Time            `json:"expiresAt,omitempty"`
}

// ContextPackage is a signed, versioned, scoped summary (spec 13.3), never
// an authoritative replacement of the history it cites.
type ContextPackage struct {
	// PackageID names the package across its versions.
	PackageID string `json:"packageId"`
	// Version counts from 1; each update is the next version.
	Version uint64 `json:"version"`
	// PreviousVersion is the version this one replaces (required from 2).
	PreviousVersion *PackageVersionRef `json:"previousVersion,omitempty"`
	Scope           ContextScope       `json:"scope"`
	SourceEvents    EventRange         `json:"sourceEvents"`
	Artifacts       List[string]       `json:"artifacts"`
	Decisions       List[Decision]     `json:"decisions"`
	// Constraints the work must respect, as the generator read them.
	Constraints List[string] `json:"constraints"`
	// OpenQuestions are the questions still unresolved in the history.
	OpenQuestions List[string] `json:"openQuestions"`
	Generator     Generator    `json:"generator"`
	// GeneratedAt is when the generator wrote it; signature.createdAt
	// equals it.
	GeneratedAt Time      `json:"generatedAt"`
	Signature   Signature `json:"signature"`
}

// PackageVersionRef keeps the provenance of the version a package replaces.
type PackageVersionRef struct {
	// Version is the replaced version's number.
	Version uint64 `json:"version"`
	// Digest is protocol.ContextDigest of the replaced version.
	Digest string `json:"digest"`
}

// ContextScope is the Mission (and optionally WorkItem) a package covers.
type ContextScope struct {
	MissionID  string `json:"missionId"`
	GroupID    string `json:"groupId"`
	WorkItemID string `json:"workItemId,omitempty"`
}

// EventRange is the inclusive range of Group sequences a package summarizes.
type EventRange struct {
	GroupID string `json:"groupId"`
	// FromSequence is the first sequence summarized.
	FromSequence uint64 `json:"fromSequence"`
	// ToSequence is the last sequence summarized.
	ToSequence uint64 `json:"toSequence"`
}

// Decision is one recorded decision and the events that made it.
type Decision struct {
	Summary string `json:"summary"`
	// EventIDs are the events the decision was made in.
	EventIDs List[string] `json:"eventIds"`
}

// Generator identifies the agent that wrote a package.
type Generator struct {
	AgentID string `json:"agentId"`
	// AgentVersion is the generating agent's software version.
	AgentVersion string `json:"agentVersion"`
}

// GroupSnapshot is the authority-signed state of a Group after Sequence;
// replay continues after it (spec 16, CURSOR_TOO_OLD).
type GroupSnapshot struct {
	SnapshotID      string           `json:"snapshotId"`
	GroupID         string           `json:"groupId"`
	Sequence        uint64           `json:"sequence"`
	LastEventID     string           `json:"lastEventId"`
	CreatedAt       Time             `json:"createdAt"`
	CreatedBy       string           `json:"createdBy"`
	Mission         Mission          `json:"mission"`
	Memberships     List[Membership] `json:"memberships"`
	WorkItems       List[WorkItem]   `json:"workItems"`
	Approvals       List[Approval]   `json:"approvals"`
	Artifacts       List[string]     `json:"artifacts"`
	PolicyLogDigest string           `json:"policyLogDigest"`
	Signature       Signature        `json:"signature"`
}

// SnapshotRef points at a signed snapshot; it is sent in details.snapshot of
// a CURSOR_TOO_OLD error.
type SnapshotRef struct {
	SnapshotID string `json:"snapshotId"`
	GroupID    string `json:"groupId"`
	Sequence   uint64 `json:"sequence"`
	Digest     string `json:"digest"`
	URI        string `json:"uri"`
}

// ExtensionProfile is an Organization-approved extension profile (spec 18).
type ExtensionProfile struct {
	URI                  string           `json:"uri"`
	Version              string           `json:"version"`
	SchemaURI            string           `json:"schemaUri"`
	SchemaHash           string           `json:"schemaHash"`
	RequiredCapabilities List[Capability] `json:"requiredCapabilities"`
	Critical             bool             `json:"critical"`
	CommandTypes         []string         `json:"commandTypes,omitzero"`
	EventTypes           []string         `json:"eventTypes,omitzero"`
	OrganizationID       string           `json:"organizationId"`
	ApprovedAt           Time             `json:"approvedAt"`
	Signature            Signature        `json:"signature"`
}

// FirstAdmissionRecord is the Organization's signed record that an agent key
// was admitted for the first time; historical replay checks a signature
// against the record in force at its time. PreviousRecordDigest is absent
// only for the first record of the Admission Log.
type FirstAdmissionRecord struct {
	RecordID             string    `json:"recordId"`
	OrganizationID       string    `json:"organizationId"`
	AgentID              string    `json:"agentId"`
	AgentCardHash        string    `json:"agentCardHash"`
	Key                  PublicKey `json:"key"`
	AdmittedAt           Time      `json:"admittedAt"`
	AdmittedBy           Actor     `json:"admittedBy"`
	LogSequence          uint64    `json:"logSequence"`
	PreviousRecordDigest string    `json:"previousRecordDigest,omitempty"`
	Signature            Signature `json:"signature"`
}

// CooperationOverrideGrant is a durable, single-use escalation of a
// cooperation limit (spec 20). It binds one Mission, Group, policy, grantee,
// target Command type and target actionId; the target Command cites GrantID
// in cooperationOverrideGrantId.
type CooperationOverrideGrant struct {
	GrantID           string      `json:"grantId"`
	MissionID         string      `json:"missionId"`
	GroupID           string      `json:"groupId"`
	Policy            string      `json:"policy"`
	Grantee           Actor       `json:"grantee"`
	TargetCommandType CommandType `json:"targetCommandType"`
	TargetActionID    string      `json:"targetActionId"`
	Reason            string      `json:"reason"`
	Approver          Actor       `json:"approver"`
	GrantedAt         Time        `json:"grantedAt"`
	ExpiresAt         Time        `json:"expiresAt"`
}
