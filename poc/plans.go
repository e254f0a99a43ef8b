package poc

import (
	"fmt"

	"github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/plan"
)

// The Missions as plans: the coordinator package drives them. A stage's
// id is its WorkItem id, and its fields are its Work Contract's, so the
// contract the coordinator authorizes (plan.Contract) is the one the
// Mission graph builds.

// Plan is m as a plan: its WorkItem stages, with the human owner as the
// approver.
func (m MissionSpec) Plan() *plan.Plan {
	p := &plan.Plan{Name: m.MissionID,
		Mission:  plan.Mission{ID: m.MissionID, GroupID: m.GroupID, Title: m.Title, Objective: m.Objective, PriorityClass: m.PriorityClass},
		Approval: plan.Approval{Approvers: []string{humanID}, Instructions: "Review the final diff, the test report and the review notes."}}
	p.Stages = planStages(m.WorkStages())
	return p
}

// planStages turns Mission graph stages into plan stages.
func planStages(stages []Stage) []plan.Stage {
	out := make([]plan.Stage, 0, len(stages))
	for _, s := range stages {
		c := s.Contract
		deps := make([]plan.Dependency, len(c.Dependencies))
		for i, d := range c.Dependencies {
			deps[i] = plan.Dependency{Stage: d.WorkItemID, Policy: d.Policy}
		}
		out = append(out, plan.Stage{ID: s.WorkItemID, WorkItemID: s.WorkItemID, ContractID: c.ContractID, Goal: c.Goal,
			Capability: c.RequiredCapabilities[0], Acceptance: c.AcceptanceCriteria, Outputs: c.RequiredOutputs, Inputs: c.Inputs,
			DependsOn: deps, AllowedTools: c.AllowedTools, AllowedData: c.AllowedData, AllowedOperations: c.AllowedOperations,
			Resources: c.ResourceLimits, Budgets: c.Budgets, Deadline: plan.Deadline{At: c.Deadline}, Urgency: c.Urgency,
			BusinessImpact: c.BusinessImpact, Risk: c.Risk, Retry: c.RetryPolicy})
	}
	return out
}

// Inputs are the artifacts m's coordinator makes: the feature request its
// first stage reads.
func (m MissionSpec) Inputs() []coordinator.Input {
	return []coordinator.Input{{MediaType: MediaJSON, Data: FeatureRequest(m.Feature)}}
}

// Rework answers the round-th change request with ReworkStages on top of
// the patch the previous round verified; nil until that patch is
// verified.
func (m MissionSpec) Rework(round int, request string, accepted func(workItemID string) []coordinator.Output) []plan.Stage {
	base := ""
	for _, s := range m.WorkStages() {
		if s.Kind != StageImplementation {
			continue
		}
		id := s.WorkItemID
		if round > 1 {
			id = fmt.Sprintf("%s-r%d", id, round-1)
		}
		for _, o := range accepted(id) {
			if o.MediaType == MediaDiff {
				base = o.Artifact
			}
		}
	}
	if base == "" {
		return nil
	}
	return planStages(ReworkStages(m, round, request, base))
}

// kindOf is the stage kind of a WorkItem of m, rework items included.
func (m MissionSpec) kindOf(workItemID string) StageKind {
	if s, ok := m.Stage(reworkID.ReplaceAllString(workItemID, "")); ok {
		return s.Kind
	}
	return ""
}
