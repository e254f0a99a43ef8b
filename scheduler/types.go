package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Urgency is the coordinator's requested urgency (docs/wire.md Work Contract).
// It is an input to the ordering within a Group, never an override.
type Urgency uint8

// Urgency levels, lowest first; the zero value is UrgencyLow.
const (
	UrgencyLow Urgency = iota
	UrgencyNormal
	UrgencyHigh
	UrgencyCritical
)

var urgencyNames = [...]string{"low", "normal", "high", "critical"}

func (u Urgency) String() string {
	if int(u) < len(urgencyNames) {
		return urgencyNames[u]
	}
	return fmt.Sprintf("Urgency(%d)", u)
}

// ParseUrgency reads the wire spelling low|normal|high|critical.
func ParseUrgency(s string) (Urgency, error) {
	for i, n := range urgencyNames {
		if s == n {
			return Urgency(i), nil
		}
	}
	return 0, fmt.Errorf("scheduler: unknown urgency %q (want low, normal, high or critical)", s)
}

// Impact is the contract's businessImpact.
type Impact uint8

// Impact levels, lowest first; the zero value is ImpactLow.
const (
	ImpactLow Impact = iota
	ImpactMedium
	ImpactHigh
	ImpactCritical
)

var impactNames = [...]string{"low", "medium", "high", "critical"}

func (i Impact) String() string {
	if int(i) < len(impactNames) {
		return impactNames[i]
	}
	return fmt.Sprintf("Impact(%d)", i)
}

// ParseImpact reads the wire spelling low|medium|high|critical.
func ParseImpact(s string) (Impact, error) {
	for i, n := range impactNames {
		if s == n {
			return Impact(i), nil
		}
	}
	return 0, fmt.Errorf("scheduler: unknown business impact %q (want low, medium, high or critical)", s)
}

// PriorityClass is the organization priority class of a Group; it multiplies
// the Group's own weight. The zero value is ClassNormal.
type PriorityClass uint8

// Priority classes. Raising a class goes through policy or the MissionOwner
// (spec 11.1), never through a coordinator.
const (
	ClassNormal PriorityClass = iota
	ClassLow
	ClassHigh
	ClassCritical
)

var classMultiplier = [...]int64{ClassNormal: 2, ClassLow: 1, ClassHigh: 4, ClassCritical: 8}

// Resources is what an item needs from a slot, or what a slot offers. A zero
// field in a slot means "no limit on this dimension".
type Resources struct {
	MilliCPU  int64
	MemoryMiB int64
}

// Fits reports whether need fits within the slot capacity r.
func (r Resources) Fits(need Resources) bool {
	return (r.MilliCPU == 0 || need.MilliCPU <= r.MilliCPU) &&
		(r.MemoryMiB == 0 || need.MemoryMiB <= r.MemoryMiB)
}

// Gates are the eligibility conditions an item carries. The zero value is
// eligible: no pending dependency, no approval required, ownership valid.
type Gates struct {
	DependenciesPending bool // some dependency does not yet meet its policy (10.4)
	ApprovalRequired    bool // the contract's risk gate asks for approval.grant_execution
	ApprovalGranted     bool
	OwnershipLost       bool // ownership epoch fenced or offer not accepted
}

// Item is one accepted WorkItem as the scheduler sees it.
type Item struct {
	ID       string
	Group    string
	Urgency  Urgency
	Impact   Impact
	Deadline time.Time     // zero: none
	Estimate time.Duration // expected slot-time; zero: the Group's observed mean
	// Observed is how many finished runs Estimate rests on (the caller's
	// history of the item's capabilities); 0: a configured guess. The
	// confidence Disclose gives grows with it, or with the Group's own
	// finished runs when those are more.
	Observed int
	// Resources the item needs; it only starts in a slot that fits them.
	Resources   Resources
	Preemptible bool // the handler declares safe points (11.3); false is never preempted
	Gates       Gates
	// Copied into the selection basis; the scheduler does not interpret them.
	Capabilities []string
	Evidence     []string
}

// Change is a partial update of a queued or running item; nil fields stay.
type Change struct {
	Urgency     *Urgency
	Impact      *Impact
	Deadline    *time.Time
	Estimate    *time.Duration
	Observed    *int
	Preemptible *bool
	Gates       *Gates
}

// Blockers say why a queued item is not eligible.
type Blockers uint8

// Blockers, combinable.
const (
	BlockedDependencies Blockers = 1 << iota
	BlockedApproval
	BlockedOwnership
	BlockedResources // fits no slot of this worker at all
)

func (b Blockers) String() string {
	if b == 0 {
		return "none"
	}
	s := ""
	for i, n := range []string{"dependencies", "approval", "ownership", "resources"} {
		if b&(1<<i) != 0 {
			if s != "" {
				s += ","
			}
			s += n
		}
	}
	return s
}

// State is where an item is.
type State uint8

// Item states.
const (
	StateQueued     State = iota + 1 // eligible, waiting in its Group queue
	StateBlocked                     // queued but ineligible (see Blockers)
	StateRunning                     // holds a slot
	StatePreempting                  // holds a slot; cooperative preemption requested
)

func (s State) String() string {
	switch s {
	case StateQueued:
		return "queued"
	case StateBlocked:
		return "blocked"
	case StateRunning:
		return "running"
	case StatePreempting:
		return "preempting"
	}
	return "unknown"
}

// Rules is the set of policy rules applied to a decision.
type Rules uint16

// Policy rules, named in the selection basis.
const (
	RuleFairShare Rules = 1 << iota
	RuleGroupQuota
	RuleUrgencyOrder
	RuleAging
	RuleDeadlineEDF
	RuleStarvationGuard
	RuleRiskGate
	RuleResourceFit
	RulePreemptLowestPriority
	RulePreemptFairShareFloor
)

var ruleNames = []string{
	"scheduler.fair-share.virtual-time",
	"scheduler.group-quota",
	"scheduler.urgency-order",
	"scheduler.aging.max-wait",
	"scheduler.deadline.edf",
	"scheduler.anti-starvation.guard",
	"scheduler.risk-gate.approval",
	"scheduler.resources.fit",
	"scheduler.preemption.lowest-priority-victim",
	"scheduler.preemption.fair-share-floor",
}

// Names lists the rule identifiers in a fixed order.
func (r Rules) Names() []string {
	out := []string{}
	for i, n := range ruleNames {
		if r&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// MarshalJSON writes the rules as an array of identifiers.
func (r Rules) MarshalJSON() ([]byte, error) { return json.Marshal(r.Names()) }

// SelectionBasis is the structured basis recorded with every decision (spec
// 10.3; docs/wire.md). It holds no free-form reasoning.
type SelectionBasis struct {
	CapabilityMatches     []string  `json:"capabilityMatches"`
	AuthorizationEligible bool      `json:"authorizationEligible"`
	AvailabilityEstimate  time.Time `json:"availabilityEstimate"` // when the slot is available
	ExpectedCost          int64     `json:"expectedCost"`         // expected slot-milliseconds
	ReliabilityEvidence   []string  `json:"reliabilityEvidence"`
	PolicyRulesApplied    Rules     `json:"policyRulesApplied"`
}

// Decision assigns an item to a free slot.
type Decision struct {
	Item  string
	Group string
	Slot  int
	Basis SelectionBasis
}

// PreemptRequest asks the runtime to have Item reach a safe point, checkpoint
// and then call Release; the slot stays busy until then (11.3).
type PreemptRequest struct {
	Item  string // the victim
	Group string
	Slot  int
	For   string // the queued item that could not start
	Basis SelectionBasis
}

// CapacityState is the disclosed capacity state (11.2).
type CapacityState string

// Capacity states (docs/wire.md).
const (
	CapacityAvailable   CapacityState = "available"
	CapacityConstrained CapacityState = "constrained"
	CapacitySaturated   CapacityState = "saturated"
	CapacityOffline     CapacityState = "offline"
)

// Window is a time interval.
type Window struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Disclosure is the schedule disclosure for one accepted item (11.2). It is
// computed from the item's own Group and aggregate load only.
type Disclosure struct {
	EstimatedStartWindow Window        `json:"estimatedStartWindow"`
	EstimatedCompletion  time.Time     `json:"estimatedCompletion"`
	Confidence           float64       `json:"confidence"`
	CapacityState        CapacityState `json:"capacityState"`
	ComputedAt           time.Time     `json:"computedAt"`
}

// Errors returned by the scheduler; compare with errors.Is.
var (
	ErrUnknownGroup = errors.New("scheduler: unknown group")
	ErrUnknownItem  = errors.New("scheduler: unknown item")
	ErrDuplicate    = errors.New("scheduler: duplicate item id")
	ErrWrongState   = errors.New("scheduler: item is not in the required state")
	ErrInvalid      = errors.New("scheduler: invalid argument")
)
