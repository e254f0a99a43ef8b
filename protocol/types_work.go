package protocol

// Urgency is the coordinator's requested urgency: a scheduling input, never
// an override (spec 11.1).
type Urgency string

// The four urgencies.
const (
	UrgencyLow      Urgency = "low"
	UrgencyNormal   Urgency = "normal"
	UrgencyHigh     Urgency = "high"
	UrgencyCritical Urgency = "critical"
)

// Rank orders urgencies from 0 (low) to 3 (critical); unknown values are -1.
func (u Urgency) Rank() int {
	switch u {
	case UrgencyLow:
		return 0
	case UrgencyNormal:
		return 1
	case UrgencyHigh:
		return 2
	case UrgencyCritical:
		return 3
	}
	return -1
}

// Known reports whether u is one of the four urgencies.
func (u Urgency) Known() bool { return u.Rank() >= 0 }

// PriorityClass is the Organization priority class of a Mission, an input to
// the scheduler's Group weights. It has the same four levels as Urgency.
type PriorityClass string

// The four priority classes.
const (
	PriorityLow      PriorityClass = "low"
	PriorityNormal   PriorityClass = "normal"
	PriorityHigh     PriorityClass = "high"
	PriorityCritical PriorityClass = "critical"
)

// Rank orders priority classes from 0 (low) to 3 (critical); unknown is -1.
func (p PriorityClass) Rank() int { return Urgency(p).Rank() }

// Known reports whether p is one of the four priority classes.
func (p PriorityClass) Known() bool { return p.Rank() >= 0 }

// level ranks the low|medium|high|critical scale shared by risk and impact.
func level(s string) int {
	switch s {
	case "low":
		return 0
	case "medium":
		return 1
	case "high":
		return 2
	case "critical":
		return 3
	}
	return -1
}

// RiskClass classifies a Work Contract's risk (spec 10.1).
type RiskClass string

// The four risk classes.
const (
	RiskLow      RiskClass = "low"
	RiskMedium   RiskClass = "medium"
	RiskHigh     RiskClass = "high"
	RiskCritical RiskClass = "critical"
)

// Rank orders risk classes from 0 (low) to 3 (critical); unknown is -1.
func (r RiskClass) Rank() int { return level(string(r)) }

// Known reports whether r is one of the four risk classes.
func (r RiskClass) Known() bool { return r.Rank() >= 0 }

// BusinessImpact is the coordinator's stated business impact.
type BusinessImpact string

// The four business impacts.
const (
	ImpactLow      BusinessImpact = "low"
	ImpactMedium   BusinessImpact = "medium"
	ImpactHigh     BusinessImpact = "high"
	ImpactCritical BusinessImpact = "critical"
)

// Rank orders impacts from 0 (low) to 3 (critical); unknown is -1.
func (b BusinessImpact) Rank() int { return level(string(b)) }

// Known reports whether b is one of the four impacts.
func (b BusinessImpact) Known() bool { return b.Rank() >= 0 }

// WorkContract is the versioned, machine-readable contract every WorkItem
// carries (spec 10.1, docs/wire.md). All members but Notes are required; prose in
// Notes never replaces a field.
type WorkContract struct {
	ContractID           string                    `json:"contractId"`
	Revision             uint64                    `json:"revision"`
	Goal                 string                    `json:"goal"`
	RequiredOutputs      List[OutputSpec]          `json:"requiredOutputs"`
	AcceptanceCriteria   List[AcceptanceCriterion] `json:"acceptanceCriteria"`
	Inputs               List[InputRef]            `json:"inputs"`
	Dependencies         List[Dependency]          `json:"dependencies"`
	AllowedTools         List[string]              `json:"allowedTools"`
	AllowedData          List[string]              `json:"allowedData"`
	AllowedOperations    List[string]              `json:"allowedOperations"`
	ResourceLimits       ResourceLimits            `json:"resourceLimits"`
	RequiredCapabilities List[Capability]          `json:"requiredCapabilities"`
	Deadline             Time                      `json:"deadline"`
	Urgency              Urgency                   `json:"urgency"`
	BusinessImpact       BusinessImpact            `json:"businessImpact"`
	Budgets              Budgets                   `json:"budgets"`
	RetryPolicy          RetryPolicy               `json:"retryPolicy"`
	Risk                 Risk                      `json:"risk"`
	Notes                string                    `json:"notes,omitempty"`
}

// OutputSpec names one required output.
type OutputSpec struct {
	Name      string `json:"name"`
	MediaType string `json:"mediaType"`
	Schema    string `json:"schema,omitempty"`
}

// AcceptanceCriterion is one criterion a submission's Evidence must address.
type AcceptanceCriterion struct {
	ID               string       `json:"id"`
	Description      string       `json:"description"`
	EvidenceRequired List[string] `json:"evidenceRequired"`
}

// InputRef references an input Artifact by content digest.
type InputRef struct {
	Artifact string `json:"artifact"`
	Name     string `json:"name,omitempty"`
}

// DependencyPolicy says what state of the prerequisite satisfies a
// dependency (spec 10.4).
type DependencyPolicy string

// The dependency policies.
const (
	DependencyVerified  DependencyPolicy = "verified"
	DependencySubmitted DependencyPolicy = "submitted"
	DependencyTerminal  DependencyPolicy = "terminal"
)

// Known reports whether p is one of the dependency policies.
func (p DependencyPolicy) Known() bool {
	return p == DependencyVerified || p == DependencySubmitted || p == DependencyTerminal
}

// Dependency is one edge of the Mission's WorkItem DAG.
type Dependency struct {
	WorkItemID string           `json:"workItemId"`
	Policy     DependencyPolicy `json:"policy"`
}

// ResourceLimits bounds what one execution may use. Every member is
// optional; an absent member is no limit, so they are pointers (0 GPUs is a
// limit, a missing gpus member is not).
type ResourceLimits struct {
	CPU       *float64 `json:"cpu,omitempty"`
	MemoryMiB *uint64  `json:"memoryMiB,omitempty"`
	DiskMiB   *uint64  `json:"diskMiB,omitempty"`
	GPUs      *uint64  `json:"gpus,omitempty"`
}

// Float64 returns a pointer to v, for optional numbers.
func Float64(v float64) *float64 { return &v }

// Capability is a capability id with a version: a semantic version in an
// Agent Card, a range (1.x, ^1.2) in a requirement.
type Capability struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// Usage is a six-dimension resource amount: a usage delta, a total, or an
// expected cost (spec 11.5).
type Usage struct {
	Money            float64 `json:"money"`
	Tokens           uint64  `json:"tokens"`
	ToolCalls        uint64  `json:"toolCalls"`
	ComputeSeconds   float64 `json:"computeSeconds"`
	WallClockSeconds float64 `json:"wallClockSeconds"`
	SideEffects      uint64  `json:"sideEffects"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Money:            u.Money + v.Money,
		Tokens:           u.Tokens + v.Tokens,
		ToolCalls:        u.ToolCalls + v.ToolCalls,
		ComputeSeconds:   u.ComputeSeconds + v.ComputeSeconds,
		WallClockSeconds: u.WallClockSeconds + v.WallClockSeconds,
		SideEffects:      u.SideEffects + v.SideEffects,
	}
}

// IsZero reports whether every dimension is zero; the authority records a
// resource_usage_recorded event only for a non-zero delta.
func (u Usage) IsZero() bool { return u == Usage{} }

// Budgets caps the six dimensions. Each member is optional (absent means no
// cap in that dimension) and at least one must be present.
type Budgets struct {
	Money            *float64 `json:"money,omitempty"`
	Tokens           *uint64  `json:"tokens,omitempty"`
	ToolCalls        *uint64  `json:"toolCalls,omitempty"`
	ComputeSeconds   *float64 `json:"computeSeconds,omitempty"`
	WallClockSeconds *float64 `json:"wallClockSeconds,omitempty"`
	SideEffects      *uint64  `json:"sideEffects,omitempty"`
}

// Exceeded returns the wire name of the first dimension in which used is over
// its cap, or "" when used fits every present cap.
func (b Budgets) Exceeded(used Usage) string {
	switch {
	case b.Money != nil && used.Money > *b.Money:
		return "money"
	case b.Tokens != nil && used.Tokens > *b.Tokens:
		return "tokens"
	case b.ToolCalls != nil && used.ToolCalls > *b.ToolCalls:
		return "toolCalls"
	case b.ComputeSeconds != nil && used.ComputeSeconds > *b.ComputeSeconds:
		return "computeSeconds"
	case b.WallClockSeconds != nil && used.WallClockSeconds > *b.WallClockSeconds:
		return "wallClockSeconds"
	case b.SideEffects != nil && used.SideEffects > *b.SideEffects:
		return "sideEffects"
	}
	return ""
}

// RetryPolicy bounds automatic retries by attempts, backoff, time and cost
// (spec 11.4).
type RetryPolicy struct {
	MaxAttempts      uint64  `json:"maxAttempts"`
	Backoff          Backoff `json:"backoff"`
	AttemptTimeoutMs uint64  `json:"attemptTimeoutMs"`
	CostLimit        float64 `json:"costLimit"`
}

// Backoff is exponential: InitialMs, multiplied by Multiplier per attempt,
// capped at MaxMs.
type Backoff struct {
	InitialMs  uint64  `json:"initialMs"`
	MaxMs      uint64  `json:"maxMs"`
	Multiplier float64 `json:"multiplier"`
}

// Risk is the contract's risk class and whether execution needs approval
// first (approval.grant_execution).
type Risk struct {
	Class                RiskClass `json:"class"`
	PreExecutionApproval bool      `json:"preExecutionApproval"`
}

// WorkItemState is a state of the WorkItem state machine (spec 10.2).
type WorkItemState string

// The WorkItem states of spec 10.2.
const (
	WorkOpen      WorkItemState = "open"
	WorkOffered   WorkItemState = "offered"
	WorkQueued    WorkItemState = "queued"
	WorkActive    WorkItemState = "active"
	WorkBlocked   WorkItemState = "blocked"
	WorkSubmitted WorkItemState = "submitted"
	WorkVerified  WorkItemState = "verified"
	WorkFailed    WorkItemState = "failed"
	WorkCancelled WorkItemState = "cancelled"
	// WorkProposed is the open work proposal left by work.propose. No
	// WorkItem exists yet (spec 10.2), so it is never a WorkItem's state
	// member on the wire and Known reports false for it.
	WorkProposed WorkItemState = "proposed"
)

// Known reports whether s is a state a WorkItem can have on the wire.
func (s WorkItemState) Known() bool {
	switch s {
	case WorkOpen, WorkOffered, WorkQueued, WorkActive, WorkBlocked,
		WorkSubmitted, WorkVerified, WorkFailed, WorkCancelled:
		return true
	}
	return false
}

// Terminal reports whether s ends the WorkItem's revision (spec 10.2).
func (s WorkItemState) Terminal() bool { return s == WorkVerified || s == WorkCancelled }

// WorkItem is the authority's record of one unit of work.
type WorkItem struct {
	WorkItemID     string          `json:"workItemId"`
	MissionID      string          `json:"missionId"`
	GroupID        string          `json:"groupId"`
	State          WorkItemState   `json:"state"`
	Contract       WorkContract    `json:"contract"`
	Revision       uint64          `json:"revision"`
	Offer          *Offer          `json:"offer,omitempty"`
	Ownership      *OwnershipGrant `json:"ownership,omitempty"`
	Lease          *ExecutionLease `json:"lease,omitempty"`
	Blocker        *Resolution     `json:"blocker,omitempty"`
	Checkpoint     *CheckpointRef  `json:"checkpoint,omitempty"`
	ChildMissionID string          `json:"childMissionId,omitempty"`
	Attempts       uint64          `json:"attempts"`
	CreatedAt      Time            `json:"createdAt"`
	UpdatedAt      Time            `json:"updatedAt"`
}

// Offer is the durable offer standing on a WorkItem (spec 10.3).
type Offer struct {
	OfferID    string       `json:"offerId"`
	Candidates List[string] `json:"candidates"`
	ExpiresAt  Time         `json:"expiresAt"`
}

// ResolutionKind classifies what a blocked WorkItem needs.
type ResolutionKind string

// The resolution kinds.
const (
	ResolutionClarification ResolutionKind = "clarification"
	ResolutionDependency    ResolutionKind = "dependency"
	ResolutionApproval      ResolutionKind = "approval"
	ResolutionResource      ResolutionKind = "resource"
	ResolutionSubwork       ResolutionKind = "subwork"
	ResolutionOther         ResolutionKind = "other"
)

// Resolution is the resolution a blocked WorkItem requires (spec 11.4).
type Resolution struct {
	Kind   ResolutionKind `json:"kind"`
	Detail string         `json:"detail"`
}

// CheckpointRef names the last durable checkpoint of a WorkItem.
type CheckpointRef struct {
	CheckpointID string `json:"checkpointId"`
	StateDigest  string `json:"stateDigest"`
	At           Time   `json:"at"`
}

// OwnershipGrant is the fenced ownership won by the first valid acceptance.
type OwnershipGrant struct {
	WorkItemID     string `json:"workItemId"`
	OwnerAgentID   string `json:"ownerAgentId"`
	OwnershipEpoch uint64 `json:"ownershipEpoch"`
	StartDeadline  Time   `json:"startDeadline"`
}

// ExecutionLease authorizes running a WorkItem (spec 11.3). Every renewal,
// checkpoint, block, publish, submit and failure names LeaseID.
type ExecutionLease struct {
	LeaseID        string     `json:"leaseId"`
	AgentID        string     `json:"agentId"`
	SessionEpoch   uint64     `json:"sessionEpoch"`
	WorkItemID     string     `json:"workItemId"`
	OwnershipEpoch uint64     `json:"ownershipEpoch"`
	StartedAt      Time       `json:"startedAt"`
	Renewals       List[Time] `json:"renewals"`
	ExpiresAt      Time       `json:"expiresAt"`
}

// Progress is a structured progress report (spec 11.4); there are no
// percentages. EvidenceRefs are artifact or evidence digests.
type Progress struct {
	Phase               string          `json:"phase"`
	MilestonesCompleted List[string]    `json:"milestonesCompleted"`
	NextCheckpoint      string          `json:"nextCheckpoint"`
	Blockers            List[string]    `json:"blockers"`
	RevisedEstimate     RevisedEstimate `json:"revisedEstimate"`
	EvidenceRefs        List[string]    `json:"evidenceRefs"`
}

// RevisedEstimate is the current completion estimate; Confidence is 0…1.
type RevisedEstimate struct {
	CompletionAt Time    `json:"completionAt"`
	Confidence   float64 `json:"confidence"`
}

// CapacityState is a worker's coarse capacity (spec 11.2).
type CapacityState string

// The four capacity states.
const (
	CapacityAvailable   CapacityState = "available"
	CapacityConstrained CapacityState = "constrained"
	CapacitySaturated   CapacityState = "saturated"
	CapacityOffline     CapacityState = "offline"
)

// Known reports whether c is one of the four capacity states.
func (c CapacityState) Known() bool {
	switch c {
	case CapacityAvailable, CapacityConstrained, CapacitySaturated, CapacityOffline:
		return true
	}
	return false
}

// ScheduleDisclosure tells a coordinator when accepted work should run
// (spec 11.2). It never names or positions another Group's work.
type ScheduleDisclosure struct {
	EstimatedStartWindow TimeWindow    `json:"estimatedStartWindow"`
	EstimatedCompletion  Time          `json:"estimatedCompletion"`
	Confidence           float64       `json:"confidence"`
	CapacityState        CapacityState `json:"capacityState"`
	ComputedAt           Time          `json:"computedAt"`
}

// TimeWindow is the closed interval [From, To].
type TimeWindow struct {
	From Time `json:"from"`
	To   Time `json:"to"`
}

// SelectionBasis is the structured reason for an assignment (spec 10.3); it
// holds no private chain of thought.
type SelectionBasis struct {
	CapabilityMatches     List[CapabilityMatch]   `json:"capabilityMatches"`
	AuthorizationEligible bool                    `json:"authorizationEligible"`
	AvailabilityEstimate  AvailabilityEstimate    `json:"availabilityEstimate"`
	ExpectedCost          Budgets                 `json:"expectedCost"`
	ReliabilityEvidence   List[ReliabilityRecord] `json:"reliabilityEvidence"`
	PolicyRulesApplied    List[string]            `json:"policyRulesApplied"`
}

// CapabilityMatch pairs a required capability range with the offered version.
type CapabilityMatch struct {
	ID       string `json:"id"`
	Required string `json:"required"`
	Offered  string `json:"offered"`
}

// AvailabilityEstimate is when the candidate could start; Confidence is 0…1.
type AvailabilityEstimate struct {
	EarliestStart Time    `json:"earliestStart"`
	Confidence    float64 `json:"confidence"`
}

// ReliabilityRecord is capability-specific track record.
type ReliabilityRecord struct {
	CapabilityID string `json:"capabilityId"`
	Attempts     uint64 `json:"attempts"`
	Successes    uint64 `json:"successes"`
}

// AdmissionReason is why a worker declined an offer (spec 10.3).
type AdmissionReason string

// The admission rejection reasons.
const (
	RejectCapacity      AdmissionReason = "capacity"
	RejectDeadline      AdmissionReason = "deadline"
	RejectCapability    AdmissionReason = "capability"
	RejectAuthorization AdmissionReason = "authorization"
	RejectDependency    AdmissionReason = "dependency"
	RejectBudget        AdmissionReason = "budget"
)

// Known reports whether r is one of the six reasons.
func (r AdmissionReason) Known() bool {
	switch r {
	case RejectCapacity, RejectDeadline, RejectCapability, RejectAuthorization,
		RejectDependency, RejectBudget:
		return true
	}
	return false
}

// AdmissionRejection is a worker's structured refusal to commit.
type AdmissionRejection struct {
	Reason AdmissionReason `json:"reason"`
	Detail string          `json:"detail"`
}

// OfflineBinding is the data of the critical bounded-offline-execution
// extension (OfflineExtensionURI) on every Command buffered while
// disconnected (spec 11.5). It survives rebasing and re-signing unchanged.
type OfflineBinding struct {
	AgentID                  string `json:"agentId"`
	GroupID                  string `json:"groupId"`
	WorkItemID               string `json:"workItemId"`
	OriginalSessionEpoch     uint64 `json:"originalSessionEpoch"`
	OwnershipEpoch           uint64 `json:"ownershipEpoch"`
	HistoricalLeaseID        string `json:"historicalLeaseId"`
	DisconnectedAt           Time   `json:"disconnectedAt"`
	BufferedAt               Time   `json:"bufferedAt"`
	GraceDeadline            Time   `json:"graceDeadline"`
	HistoricalLeaseExpiresAt Time   `json:"historicalLeaseExpiresAt"`
	UsageDelta               Usage  `json:"usageDelta"`
}
