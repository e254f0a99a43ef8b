package poc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

var base = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// validContract checks a contract against the work-contract schema and the
// authority's completeness check.
func validContract(t *testing.T, c protocol.WorkContract) {
	t.Helper()
	raw, err := protocol.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.Validate("work-contract", doc); err != nil {
		t.Errorf("%s: schema: %v", c.ContractID, err)
	}
	if err := group.CheckContract(&c); err != nil {
		t.Errorf("%s: CheckContract: %v", c.ContractID, err)
	}
}

func TestMissionContractsValid(t *testing.T) {
	a, b := MissionA(base), MissionB(base)
	for _, m := range []MissionSpec{a, b} {
		ids := map[string]bool{}
		for i, s := range m.WorkStages() {
			validContract(t, s.Contract)
			c := s.Contract
			// Every docs/wire.md member is really filled, not just present.
			if len(c.AllowedTools) == 0 || len(c.AllowedData) == 0 || len(c.AllowedOperations) == 0 || c.ResourceLimits.CPU == nil ||
				c.RetryPolicy.AttemptTimeoutMs == 0 || c.RetryPolicy.CostLimit == 0 || !c.Deadline.After(base) {
				t.Errorf("%s: a member is empty: %+v", s.WorkItemID, c)
			}
			bud := c.Budgets
			if bud.Money == nil || bud.Tokens == nil || bud.ToolCalls == nil || bud.ComputeSeconds == nil || bud.WallClockSeconds == nil || bud.SideEffects == nil {
				t.Errorf("%s: budgets lack a dimension: %+v", s.WorkItemID, bud)
			}
			for _, ac := range c.AcceptanceCriteria {
				if len(ac.EvidenceRequired) == 0 {
					t.Errorf("%s/%s: no evidenceRequired", s.WorkItemID, ac.ID)
				}
			}
			for _, d := range c.Dependencies {
				if d.Policy != protocol.DependencyVerified || !ids[d.WorkItemID] {
					t.Errorf("%s: dependency %+v is not a verified edge to an earlier stage", s.WorkItemID, d)
				}
			}
			if (i == 0) != (len(c.Inputs) == 1 && c.Inputs[0].Name == OutFeatureRequest) {
				t.Errorf("%s: inputs %+v", s.WorkItemID, c.Inputs)
			}
			ids[s.WorkItemID] = true
		}
		last := m.Stages[len(m.Stages)-1]
		if last.Kind != StageApproval || last.WorkItemID != "" {
			t.Errorf("%s: the graph does not end with the human approval: %+v", m.MissionID, last)
		}
	}
	var kinds []StageKind
	for _, s := range a.Stages {
		kinds = append(kinds, s.Kind)
	}
	want := []StageKind{StageRequirements, StageImplementation, StageTesting, StageReview}
	for range LoadStagesA {
		want = append(want, StageLoad)
	}
	for range SoakStages {
		want = append(want, StageSoak)
	}
	if want = append(want, StageIntegration, StageApproval); !slices.Equal(kinds, want) {
		t.Errorf("mission A stages %v", kinds)
	}
	if a.GroupID == b.GroupID || a.PriorityClass == b.PriorityClass {
		t.Errorf("missions share a Group or a priority class")
	}
	// At least three of B's stages need capabilities A needs too.
	shared := 0
	for _, sb := range b.WorkStages() {
		for _, sa := range a.WorkStages() {
			if sa.Contract.RequiredCapabilities[0] == sb.Contract.RequiredCapabilities[0] {
				shared++
				break
			}
		}
	}
	if shared < 3 {
		t.Errorf("mission B shares %d capabilities with A", shared)
	}
	// Rework stages stay valid and depend on each other, not on the
	// superseded items.
	rw := ReworkStages(a, 1, protocol.Digest([]byte("cr")), protocol.Digest([]byte("patch")))
	if len(rw) != 4 || rw[0].WorkItemID != "wi-a-impl-r1" {
		t.Fatalf("rework stages %+v", rw)
	}
	for _, s := range rw {
		validContract(t, s.Contract)
		for _, d := range s.Contract.Dependencies {
			if d.WorkItemID != "wi-a-req" && !slices.ContainsFunc(rw, func(o Stage) bool { return o.WorkItemID == d.WorkItemID }) {
				t.Errorf("%s depends on %s", s.WorkItemID, d.WorkItemID)
			}
		}
	}
	// An incomplete contract is caught by both checks.
	bad := a.Stages[0].Contract
	bad.AcceptanceCriteria = nil
	if err := group.CheckContract(&bad); protocol.CodeOf(err) != protocol.CodeWorkContractIncomplete {
		t.Errorf("incomplete contract: %v", err)
	}
	raw, _ := protocol.Marshal(bad)
	doc, _ := protocol.Parse(raw, protocol.DecodeOptions{})
	if protocol.Validate("work-contract", doc) == nil {
		t.Error("schema accepted a contract without acceptance criteria")
	}
}

// The embedded project is byte for byte the buildable testdata project.
func TestTinyProjectMatchesTestdata(t *testing.T) {
	disk, err := ReadTree(filepath.Join("testdata", "tinyproj"))
	if err != nil {
		t.Fatal(err)
	}
	mem := TinyProject()
	if len(disk) != len(mem) {
		t.Fatalf("testdata has %v, TinyProject %v", disk.paths(), mem.paths())
	}
	for p, c := range mem {
		if disk[p] != c {
			t.Errorf("%s differs from testdata", p)
		}
	}
	if _, err := os.Stat(filepath.Join("testdata", "tinyproj", "go.mod")); err != nil {
		t.Fatal(err)
	}
}

// The PoC worker takes every stage both Missions have ready at once (each
// Mission's review and load stages, released together by its tests, and
// the priority-arrival hotfix): were some refused for capacity, they would
// reach the scheduler one at a time and the contention window would not
// show its sharing.
func TestWorkerTakesEveryReadyStage(t *testing.T) {
	upToTests := map[StageKind]bool{StageRequirements: true, StageImplementation: true, StageTesting: true}
	ready := 1 // the hotfix
	for _, m := range []MissionSpec{MissionA(base), MissionB(base)} {
		for _, s := range m.WorkStages() {
			after := len(s.Contract.Dependencies) > 0
			for _, d := range s.Contract.Dependencies {
				if ds, ok := m.Stage(d.WorkItemID); !ok || !upToTests[ds.Kind] {
					after = false
				}
			}
			if after && !upToTests[s.Kind] {
				ready++
			}
		}
	}
	if ready != LoadStagesA+LoadStagesB+3 {
		t.Errorf("%d stages ready at once after the tests, want both Missions' loads, reviews and the hotfix", ready)
	}
	if c := queueDepth * slotsPerWk; c < ready {
		t.Errorf("the PoC worker commits to %d items, %d are ready at once", c, ready)
	}
}

// The WorkItems added to a Mission while it runs are named in the report
// after what they play, with the stage kind whose handler ran them.
func TestAddedStage(t *testing.T) {
	a := MissionA(time.Unix(0, 0))
	for _, c := range []struct {
		item, name string
		kind       StageKind
	}{
		{hotfixID, "hotfix", StageRequirements},
		{"wi-a-impl-r1", "implementation r1", StageImplementation},
		{"wi-a-integ-r2", "integration r2", StageIntegration},
		{"wi-a-nope-r1", "wi-a-nope-r1", ""},
		{"wi-x", "wi-x", ""},
	} {
		if name, kind := addedStage(a, c.item); name != c.name || kind != c.kind {
			t.Errorf("%s: %q %q, want %q %q", c.item, name, kind, c.name, c.kind)
		}
	}
	for _, k := range []StageKind{StageRequirements, StageImplementation, StageTesting, StageReview, StageIntegration, StageLoad, StageSoak} {
		if got := kindOfCapability(templateFor(k, Feature{}).capability); got != k {
			t.Errorf("capability of %s: kind %q", k, got)
		}
	}
	if got := kindOfCapability("dev.unknown"); got != "" {
		t.Errorf("unknown capability: kind %q", got)
	}
}
