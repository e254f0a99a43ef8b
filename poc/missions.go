package poc

import (
	"fmt"
	"strconv"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The capabilities the mission graphs require. Workers advertise them in
// their Agent Cards with HandlerVersion; contracts ask for the 1.x range.
const (
	CapRequirements = "dev.requirements"
	CapImplement    = "dev.implement"
	CapTest         = "dev.test"
	CapReview       = "dev.review"
	CapIntegrate    = "dev.integrate"
	CapLoad         = "dev.load"
	CapSoak         = "dev.soak"

	HandlerVersion = "1.0.0"
	capRange       = "1.x"
)

// StageKind is the part a stage plays in a software-development mission.
type StageKind string

// The stage kinds. StageApproval is the human approval of the Mission
// (mission.submit_for_approval then mission.approve, docs/design.md §11): a
// stage of the graph, but not a WorkItem, because only agents execute
// WorkItems and the approval is the human MissionOwner's alone.
const (
	StageRequirements   StageKind = "requirements"
	StageImplementation StageKind = "implementation"
	StageTesting        StageKind = "testing"
	StageReview         StageKind = "review"
	StageIntegration    StageKind = "integration"
	// StageLoad is a load stage (handlers_load.go): parallel branches that
	// keep both Groups backlogged so weighted sharing shows.
	StageLoad StageKind = "load"
	// StageSoak is a long load stage (handlers_load.go, SoakSteps of
	// SoakStepTime: a safe point every second) run at low urgency, the
	// run a critical arrival preempts while it is busy between two safe
	// points.
	StageSoak     StageKind = "soak"
	StageApproval StageKind = "approval"
)

// Output names: the coordinator passes a verified stage's outputs to the
// stages that depend on it as contract inputs under these names.
const (
	OutFeatureRequest = "feature-request"
	OutRequirements   = "requirements-note"
	OutPatch          = "patch"
	OutTestReport     = "test-report"
	OutReviewNotes    = "review-notes"
	OutReceipt        = "integration-receipt"
	OutChangeRequest  = "change-request"
	OutBasePatch      = "base-patch"
	OutLoadReport     = "load-report"
)

// Media types of the outputs.
const (
	MediaMarkdown = "text/markdown"
	MediaDiff     = "text/x-diff"
	MediaJSON     = "application/json"
)

// Stage is one node of a Mission graph.
type Stage struct {
	Name string
	Kind StageKind
	// WorkItemID and Contract are empty for StageApproval.
	WorkItemID string
	Contract   protocol.WorkContract
}

// MissionSpec is a Mission graph: pure data, built by MissionA and
// MissionB from a time base.
type MissionSpec struct {
	MissionID     string
	GroupID       string
	Title         string
	Objective     string
	PriorityClass protocol.PriorityClass
	// Feature is what the Mission builds; its canonical JSON is the
	// feature-request input of the first stage.
	Feature Feature
	// Stages in graph order; dependencies only point backwards.
	Stages []Stage
}

// Feature describes one function to add to the tiny project: the request a
// human files and the requirements stage turns into a note.
type Feature struct {
	ID        string `json:"id"`
	Package   string `json:"package"`
	File      string `json:"file"` // base name of the new source file, without .go
	Func      string `json:"func"`
	Signature string `json:"signature"` // the parameter list and result, after the name
	Doc       string `json:"doc"`
	// Body holds the function's statements, one per line.
	Body      []string   `json:"body"`
	Cases     []TestCase `json:"cases"`
	Changelog string     `json:"changelog"`
}

// TestCase is one acceptance test case: Func(Args) == Want.
type TestCase struct {
	Args string `json:"args"`
	Want string `json:"want"`
}

// WorkStages returns the stages that are WorkItems, in graph order.
func (m MissionSpec) WorkStages() []Stage {
	var out []Stage
	for _, s := range m.Stages {
		if s.WorkItemID != "" {
			out = append(out, s)
		}
	}
	return out
}

// Stage returns the stage of a WorkItem.
func (m MissionSpec) Stage(workItemID string) (Stage, bool) {
	for _, s := range m.Stages {
		if s.WorkItemID != "" && s.WorkItemID == workItemID {
			return s, true
		}
	}
	return Stage{}, false
}

// MissionA is the Mission that exercises every stage: requirements
// analysis → implementation → testing → code review → integration → human
// approval, in Group grp-a with priority class high.
func MissionA(base time.Time) MissionSpec {
	m := MissionSpec{
		MissionID: "mis-a", GroupID: "grp-a", PriorityClass: protocol.PriorityHigh,
		Title:     "Add calc.Clamp",
		Objective: "Add a Clamp function with tests to the tiny project and integrate it",
		Feature: Feature{
			ID: "feat-clamp", Package: "calc", File: "clamp", Func: "Clamp", Signature: "(x, lo, hi int) int",
			Doc:       "Clamp returns x limited to the closed interval [lo, hi].",
			Body:      []string{"if x < lo {", "return lo", "}", "if x > hi {", "return hi", "}", "return x"},
			Cases:     []TestCase{{"5, 0, 10", "5"}, {"-3, 0, 10", "0"}, {"42, 0, 10", "10"}, {"0, 0, 0", "0"}},
			Changelog: "calc: Clamp limits a value to an interval.",
		},
	}
	p := "wi-a-"
	m.Stages = []Stage{
		stage(base, m, "requirements analysis", StageRequirements, p+"req", nil),
		stage(base, m, "implementation", StageImplementation, p+"impl", []string{p + "req"}),
		stage(base, m, "testing", StageTesting, p+"test", []string{p + "impl"}),
		stage(base, m, "code review", StageReview, p+"review", []string{p + "impl", p + "test"}),
	}
	loads := loadStages(base, m, p, LoadStagesA)
	// Two soak stages after the loads keep both slots busy with long runs
	// when the critical hotfix arrives (driver_hotfix.go).
	var loadIDs []string
	for _, l := range loads {
		loadIDs = append(loadIDs, l.WorkItemID)
	}
	for i := range SoakStages {
		n := strconv.Itoa(i + 1)
		loads = append(loads, stage(base, m, "soak "+n, StageSoak, p+"soak-"+n, append([]string{p + "impl", p + "test"}, loadIDs...)))
	}
	// Integration comes last, after the load branches as well: the change
	// goes in once everything about it is verified.
	integDeps := []string{p + "impl", p + "review"}
	for _, l := range loads {
		integDeps = append(integDeps, l.WorkItemID)
	}
	m.Stages = append(m.Stages, loads...)
	m.Stages = append(m.Stages, stage(base, m, "integration", StageIntegration, p+"integ", integDeps), Stage{Name: "human approval", Kind: StageApproval})
	return m
}

// MissionB runs at the same time in Group grp-b with priority class
// normal. Its stages need the implementation, testing and review
// capabilities Mission A needs too, so both land on the shared worker.
func MissionB(base time.Time) MissionSpec {
	m := MissionSpec{
		MissionID: "mis-b", GroupID: "grp-b", PriorityClass: protocol.PriorityNormal,
		Title:     "Add calc.Abs",
		Objective: "Add an Abs function with tests to the tiny project",
		Feature: Feature{
			ID: "feat-abs", Package: "calc", File: "abs", Func: "Abs", Signature: "(x int) int",
			Doc:       "Abs returns the absolute value of x.",
			Body:      []string{"if x < 0 {", "return -x", "}", "return x"},
			Cases:     []TestCase{{"3", "3"}, {"-3", "3"}, {"0", "0"}},
			Changelog: "calc: Abs returns the absolute value of an integer.",
		},
	}
	p := "wi-b-"
	m.Stages = []Stage{
		stage(base, m, "implementation", StageImplementation, p+"impl", nil),
		stage(base, m, "testing", StageTesting, p+"test", []string{p + "impl"}),
		stage(base, m, "code review", StageReview, p+"review", []string{p + "impl", p + "test"}),
	}
	m.Stages = append(append(m.Stages, loadStages(base, m, p, LoadStagesB)...), Stage{Name: "human approval", Kind: StageApproval})
	return m
}

// Load stages per Mission: the same number for both, not in the ratio of
// the weights (4:2). With backlogs in that ratio any scheduler that keeps
// both queues moving (longest queue first, round robin by item, FIFO
// over a joint arrival) lands near the weight shares; with equal backlogs
// only weighted fair sharing gives grp-a two thirds of the slot-time while
// both wait (longest-queue-first gives about half, which the report shows
// beside it). The window lasts until grp-a's sixteen have started, with
// some eight of grp-b's: many short runs rather than a few long ones, since
// weighted fair sharing keeps a Group within about one run of its share,
// and two dozen runs put one run at about four share points.
const (
	LoadStagesA = 16
	LoadStagesB = 16
)

// loadStages are a Mission's n parallel load branches, each after the
// tests of its patch.
func loadStages(base time.Time, m MissionSpec, p string, n int) []Stage {
	var out []Stage
	for i := range n {
		n := strconv.Itoa(i + 1)
		out = append(out, stage(base, m, "load "+n, StageLoad, p+"load-"+n, []string{p + "impl", p + "test"}))
	}
	return out
}

// stageTemplate is what differs between stage kinds.
type stageTemplate struct {
	goal       string
	capability string
	outputs    []protocol.OutputSpec
	criteria   []protocol.AcceptanceCriterion
	tools      []string
	ops        []string
	risk       protocol.RiskClass
	sideEffect uint64
}

func templateFor(k StageKind, f Feature) stageTemplate {
	ac := func(id, desc string, ev ...string) protocol.AcceptanceCriterion {
		return protocol.AcceptanceCriterion{ID: id, Description: desc, EvidenceRequired: ev}
	}
	fn := f.Package + "." + f.Func
	switch k {
	case StageRequirements:
		return stageTemplate{
			goal: "Analyse feature request " + f.ID + " and write the requirements note for " + fn, capability: CapRequirements,
			outputs: []protocol.OutputSpec{{Name: OutRequirements, MediaType: MediaMarkdown}},
			criteria: []protocol.AcceptanceCriterion{
				ac("ac-req-spec", "The note states the function, its signature and its behaviour", EvRequirementsNote),
				ac("ac-req-cases", "The note lists at least one acceptance test case", EvTestCases),
			},
			tools: []string{"markdown"}, ops: []string{"read", "write"}, risk: protocol.RiskLow,
		}
	case StageImplementation:
		return stageTemplate{
			goal: "Implement " + fn + " with a table-driven test as a unified diff against the tiny project", capability: CapImplement,
			outputs: []protocol.OutputSpec{{Name: OutPatch, MediaType: MediaDiff}},
			criteria: []protocol.AcceptanceCriterion{
				ac("ac-impl-applies", "The patch applies cleanly to the baseline project", EvPatchApplies),
				ac("ac-impl-tests", "The patch adds a test of the new function", EvTestsTouched),
			},
			tools: []string{"gofmt", "diff"}, ops: []string{"read", "write"}, risk: protocol.RiskLow,
		}
	case StageTesting:
		return stageTemplate{
			goal: "Apply the patch and run go test ./... on the tiny project", capability: CapTest,
			outputs: []protocol.OutputSpec{{Name: OutTestReport, MediaType: MediaJSON}},
			criteria: []protocol.AcceptanceCriterion{
				ac("ac-test-pass", "go test ./... passes on the patched project", EvTestReport),
			},
			tools: []string{"patch", "go"}, ops: []string{"read", "write", "exec"}, risk: protocol.RiskLow,
		}
	case StageReview:
		return stageTemplate{
			goal: "Review the diff of " + fn + " against its test report", capability: CapReview,
			outputs: []protocol.OutputSpec{{Name: OutReviewNotes, MediaType: MediaMarkdown}},
			criteria: []protocol.AcceptanceCriterion{
				ac("ac-review-notes", "The review notes cover every changed file", EvReviewNotes),
				ac("ac-review-clean", "No blocking finding: no TODO or FIXME, tests included, tests passed", EvReviewFindings),
			},
			tools: []string{"diff"}, ops: []string{"read"}, risk: protocol.RiskLow,
		}
	case StageIntegration:
		return stageTemplate{
			goal: "Apply the reviewed patch to the integration repository exactly once", capability: CapIntegrate,
			outputs: []protocol.OutputSpec{{Name: OutReceipt, MediaType: MediaJSON}},
			criteria: []protocol.AcceptanceCriterion{
				ac("ac-int-applied", "The patch is applied to the integration repository", EvIntegrationReceipt),
				ac("ac-int-once", "The application is keyed by its idempotency key, so a retry does not apply it twice", EvIdempotencyKey),
			},
			tools: []string{IntegrationTool}, ops: []string{"read", IntegrationOperation}, risk: protocol.RiskMedium, sideEffect: 1,
		}
	case StageLoad, StageSoak:
		capID := CapLoad
		if k == StageSoak {
			capID = CapSoak
		}
		return stageTemplate{
			goal: "Recompute the SHA-256 load chain of the " + fn + " patch in checkpointed steps", capability: capID,
			outputs: []protocol.OutputSpec{{Name: OutLoadReport, MediaType: MediaJSON}},
			criteria: []protocol.AcceptanceCriterion{
				ac("ac-load-chain", "The load report's chain recomputes from the input patch", EvLoadChain),
			},
			tools: []string{"sha256"}, ops: []string{"read"}, risk: protocol.RiskLow,
		}
	}
	panic(fmt.Sprintf("poc: no template for stage kind %q", k))
}

// stage builds a WorkItem stage with a complete Work Contract (every
// member of docs/wire.md); deps are verified-policy dependencies.
func stage(base time.Time, m MissionSpec, name string, k StageKind, id string, deps []string) Stage {
	t := templateFor(k, m.Feature)
	ds := make(protocol.List[protocol.Dependency], len(deps))
	for i, d := range deps {
		ds[i] = protocol.Dependency{WorkItemID: d, Policy: protocol.DependencyVerified}
	}
	urgency, impact := protocol.UrgencyNormal, protocol.ImpactMedium
	switch {
	case k == StageSoak:
		// Background work: the first to yield to anything more urgent.
		urgency, impact = protocol.UrgencyLow, protocol.ImpactLow
	case m.PriorityClass.Rank() >= protocol.PriorityHigh.Rank():
		urgency, impact = protocol.UrgencyHigh, protocol.ImpactHigh
	}
	money, cost := 2.0, 2.0
	c := protocol.WorkContract{
		ContractID: "wc-" + id, Revision: 1, Goal: t.goal,
		RequiredOutputs:      t.outputs,
		AcceptanceCriteria:   t.criteria,
		Inputs:               protocol.List[protocol.InputRef]{},
		Dependencies:         ds,
		AllowedTools:         t.tools,
		AllowedData:          protocol.List[string]{"repo:tinyproj", "mission:" + m.MissionID},
		AllowedOperations:    t.ops,
		ResourceLimits:       protocol.ResourceLimits{CPU: protocol.Float64(1), MemoryMiB: protocol.Uint64(512), DiskMiB: protocol.Uint64(256)},
		RequiredCapabilities: protocol.List[protocol.Capability]{{ID: t.capability, Version: capRange}},
		Deadline:             protocol.NewTime(base.Add(2 * time.Hour)),
		Urgency:              urgency,
		BusinessImpact:       impact,
		Budgets: protocol.Budgets{
			Money: &money, Tokens: protocol.Uint64(50000), ToolCalls: protocol.Uint64(20),
			ComputeSeconds: protocol.Float64(300), WallClockSeconds: protocol.Float64(900), SideEffects: protocol.Uint64(t.sideEffect),
		},
		RetryPolicy: protocol.RetryPolicy{MaxAttempts: 3, Backoff: protocol.Backoff{InitialMs: 500, MaxMs: 30000, Multiplier: 2},
			AttemptTimeoutMs: 120000, CostLimit: cost},
		Risk: protocol.Risk{Class: t.risk, PreExecutionApproval: false},
	}
	if len(deps) == 0 {
		// A root stage starts from the feature request.
		c.Inputs = protocol.List[protocol.InputRef]{{Artifact: protocol.Digest(FeatureRequest(m.Feature)), Name: OutFeatureRequest}}
	}
	return Stage{Name: name, Kind: k, WorkItemID: id, Contract: c}
}

// FeatureRequest is the canonical JSON of f: the bytes of the
// feature-request artifact, so its digest is known when the graph is built.
func FeatureRequest(f Feature) []byte {
	raw, err := protocol.Marshal(f)
	if err != nil {
		panic(fmt.Sprintf("poc: feature %s does not marshal: %v", f.ID, err)) // plain strings only
	}
	return raw
}

// ReworkStages returns the stages that answer the human's round-th change
// request: the mission's implementation and every stage after it, with new
// WorkItem ids (suffix -r<round>), dependencies remapped onto the rework
// items (stages before implementation stay as they are), and two extra
// inputs: the change request and the patch already verified (base-patch),
// which the rework patch applies on top of.
func ReworkStages(m MissionSpec, round int, changeRequest, basePatch string) []Stage {
	suffix := fmt.Sprintf("-r%d", round)
	var out []Stage
	renamed := map[string]string{}
	load := map[string]bool{}
	started := false
	for _, s := range m.WorkStages() {
		if s.Kind == StageImplementation {
			started = true
		}
		if s.Kind == StageLoad || s.Kind == StageSoak {
			// Load stages are not redone (they show scheduling, not the
			// change), and nothing of the rework waits for them.
			load[s.WorkItemID] = true
			continue
		}
		if !started {
			continue
		}
		renamed[s.WorkItemID] = s.WorkItemID + suffix
		c := s.Contract
		c.ContractID += suffix
		c.Goal += " (rework " + suffix[1:] + ")"
		deps := protocol.List[protocol.Dependency]{}
		for _, d := range c.Dependencies {
			if load[d.WorkItemID] {
				continue
			}
			if n, ok := renamed[d.WorkItemID]; ok {
				d.WorkItemID = n
			}
			deps = append(deps, d)
		}
		c.Dependencies = deps
		c.Inputs = append(append(protocol.List[protocol.InputRef]{}, c.Inputs...),
			protocol.InputRef{Artifact: changeRequest, Name: OutChangeRequest}, protocol.InputRef{Artifact: basePatch, Name: OutBasePatch})
		out = append(out, Stage{Name: s.Name + " " + suffix[1:], Kind: s.Kind, WorkItemID: renamed[s.WorkItemID], Contract: c})
	}
	return out
}
