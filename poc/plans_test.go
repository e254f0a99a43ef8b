package poc

import (
	"reflect"
	"testing"

	"github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/protocol"
)

// The plan's contracts are the Mission graph's, byte for byte on the
// wire: nothing of a stage's contract is lost on the way through
// plan.Stage.
func TestPlanContractsAreTheGraphs(t *testing.T) {
	for _, m := range []MissionSpec{MissionA(base), MissionB(base)} {
		p := m.Plan()
		if len(p.Stages) != len(m.WorkStages()) {
			t.Fatalf("%s: %d plan stages, %d WorkItem stages", m.MissionID, len(p.Stages), len(m.WorkStages()))
		}
		for _, s := range m.WorkStages() {
			a, err := p.Authorize(s.WorkItemID, base)
			if err != nil {
				t.Fatal(err)
			}
			got, err1 := protocol.Marshal(a.Contract)
			want, err2 := protocol.Marshal(s.Contract)
			if err1 != nil || err2 != nil || a.WorkItemID != s.WorkItemID || a.MissionID != m.MissionID || string(got) != string(want) {
				t.Errorf("%s: plan contract (%v, %v)\n%s\nwant\n%s", s.WorkItemID, err1, err2, got, want)
			}
		}
	}
}

// Rework waits for the previous round's verified patch, then names
// ReworkStages on top of it with the change request as an input.
func TestReworkRounds(t *testing.T) {
	m := MissionB(base)
	patch := protocol.Digest([]byte("patch"))
	request := protocol.Digest([]byte("request"))
	verified := map[string][]coordinator.Output{}
	accepted := func(id string) []coordinator.Output { return verified[id] }
	if got := m.Rework(1, request, accepted); got != nil {
		t.Fatalf("round 1 before the patch is verified: %d stages", len(got))
	}
	verified["wi-b-impl"] = []coordinator.Output{{Artifact: patch, MediaType: MediaDiff}}
	got := m.Rework(1, request, accepted)
	want := planStages(ReworkStages(m, 1, request, patch))
	if len(got) == 0 || !reflect.DeepEqual(got, want) || got[0].WorkItemID != "wi-b-impl-r1" {
		t.Fatalf("round 1 stages %+v, want %+v", got, want)
	}
	if m.Rework(2, request, accepted) != nil {
		t.Fatal("round 2 named before round 1's patch is verified")
	}
	if k := m.kindOf("wi-b-test-r1"); k != StageTesting {
		t.Fatalf("kind of a rework item %q", k)
	}
}
