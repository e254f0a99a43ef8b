package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// CreateMission is the mission.create payload of the plan's Mission for a
// Mission started at start (a relative deadline counts from it).
func (p *Plan) CreateMission(start time.Time) protocol.CreateMissionPayload {
	m := p.Mission
	out := protocol.CreateMissionPayload{
		MissionID: m.ID, Title: m.Title, Objective: m.Objective, PriorityClass: m.PriorityClass,
	}
	if m.Budgets != nil {
		b := *m.Budgets
		out.Budgets = &b
	}
	if !m.Deadline.IsZero() {
		d := m.Deadline.From(start)
		out.Deadline = &d
	}
	return out
}

// Contract builds the Work Contract of stage id (revision 1) for a Mission
// started at start; dependencies name WorkItem ids. It fails for an
// unknown stage id and for a stage reading an input not bound (Bind).
func (p *Plan) Contract(id string, start time.Time) (protocol.WorkContract, error) {
	st := p.Stage(id)
	if st == nil {
		return protocol.WorkContract{}, fmt.Errorf("plan %s has no stage %q", p.Name, id)
	}
	for _, in := range st.Inputs {
		if in.Artifact == "" {
			return protocol.WorkContract{}, fmt.Errorf("plan %s: stage %q reads input %q, which has no artifact bound (--input %s=FILE)", p.Name, id, in.Name, in.Name)
		}
	}
	deps := protocol.List[protocol.Dependency]{}
	for _, d := range st.DependsOn {
		deps = append(deps, protocol.Dependency{WorkItemID: p.Stage(d.Stage).WorkItemID, Policy: d.Policy})
	}
	return protocol.WorkContract{
		ContractID:           st.ContractID,
		Revision:             1,
		Goal:                 st.Goal,
		RequiredOutputs:      protocol.List[protocol.OutputSpec](clone(st.Outputs)),
		AcceptanceCriteria:   protocol.List[protocol.AcceptanceCriterion](clone(st.Acceptance)),
		Inputs:               protocol.List[protocol.InputRef](clone(st.Inputs)),
		Dependencies:         deps,
		AllowedTools:         protocol.List[string](clone(st.AllowedTools)),
		AllowedData:          protocol.List[string](clone(st.AllowedData)),
		AllowedOperations:    protocol.List[string](clone(st.AllowedOperations)),
		ResourceLimits:       st.Resources,
		RequiredCapabilities: protocol.List[protocol.Capability]{st.Capability},
		Deadline:             st.Deadline.From(start),
		Urgency:              st.Urgency,
		BusinessImpact:       st.BusinessImpact,
		Budgets:              st.Budgets,
		RetryPolicy:          st.Retry,
		Risk:                 st.Risk,
		Notes:                st.notes(),
	}, nil
}

// Authorize is the work.authorize payload creating stage id's WorkItem.
func (p *Plan) Authorize(id string, start time.Time) (protocol.AuthorizeWorkPayload, error) {
	c, err := p.Contract(id, start)
	if err != nil {
		return protocol.AuthorizeWorkPayload{}, err
	}
	return protocol.AuthorizeWorkPayload{WorkItemID: p.Stage(id).WorkItemID, MissionID: p.Mission.ID, Contract: c}, nil
}

// notes tells the worker, in the contract's prose member, what the review
// will run and whose outputs a reviewer stage reviews; the structured form
// stays on the Stage for the coordinator (0.1 has no contract member for
// either).
func (st *Stage) notes() string {
	var lines []string
	if st.Notes != "" {
		lines = append(lines, st.Notes)
	}
	if len(st.Reviews) > 0 {
		lines = append(lines, "Reviews the outputs of: "+strings.Join(st.Reviews, ", ")+".")
	}
	for _, c := range st.Checks {
		pass := fmt.Sprintf("exit %d", c.Pass.ExitCode)
		if c.Pass.StdoutContains != "" {
			pass += fmt.Sprintf(" and stdout containing %q", c.Pass.StdoutContains)
		}
		lines = append(lines, fmt.Sprintf("Review check %s: %s (passes on %s).", c.Name, strings.Join(c.Command, " "), pass))
	}
	return strings.Join(lines, "\n")
}

func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append([]T(nil), s...)
}
