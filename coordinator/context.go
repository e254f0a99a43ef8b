package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// Context Packages (spec 13.3). Before a stage is offered, the
// coordinator summarizes for it what its Group's log says: the artifacts
// of the prerequisites accepted so far, the review decisions that
// accepted them (citing their events), the constraints of its contract
// and the questions still open in the Mission (blocked items). It
// publishes a new version whenever that summary changed since the
// current one, chained to it, so each version keeps the provenance of
// the one before; the authority checks scope, chain and signature.

// contextID names the package of a WorkItem.
func contextID(workItemID string) string { return "ctx-" + workItemID }

// contextBody is what a package says; the rest (range, time, signature)
// describes when and by whom it was said.
type contextBody struct {
	artifacts   []string
	decisions   []protocol.Decision
	constraints []string
	questions   []string
}

// summarize gathers w's package content from the view. It is pure, so a
// coordinator restarted on the same log decides the same package.
func summarize(v *view, p *plan.Plan, w *group.WorkItem) contextBody {
	b := contextBody{artifacts: []string{}, decisions: []protocol.Decision{}, questions: []string{}}
	for _, d := range w.Contract.Dependencies {
		l := v.items[d.WorkItemID]
		if l == nil || l.accepted == nil {
			continue
		}
		b.artifacts = append(b.artifacts, l.accepted.artifacts...)
		b.decisions = append(b.decisions, protocol.Decision{
			Summary:  fmt.Sprintf("stage %s (%s) accepted after review", stageName(p, d.WorkItemID), d.WorkItemID),
			EventIDs: protocol.List[string]{l.acceptedEvent},
		})
	}
	slices.Sort(b.artifacts)
	b.artifacts = slices.Compact(b.artifacts)
	c := w.Contract
	b.constraints = []string{"risk class " + string(c.Risk.Class)}
	for _, x := range []struct {
		what string
		list []string
	}{{"tools", c.AllowedTools}, {"operations", c.AllowedOperations}, {"data", c.AllowedData}} {
		if len(x.list) > 0 {
			b.constraints = append(b.constraints, "allowed "+x.what+": "+strings.Join(x.list, ", "))
		}
	}
	if !c.Deadline.IsZero() {
		b.constraints = append(b.constraints, "deadline "+c.Deadline.String())
	}
	for _, id := range sortedItemIDs(v) {
		if o := v.g.Items[id]; o.State == protocol.WorkBlocked && o.Blocker != nil {
			b.questions = append(b.questions, id+": "+o.Blocker.Detail)
		}
	}
	return b
}

func stageName(p *plan.Plan, workItemID string) string {
	for _, s := range p.Stages {
		if s.WorkItemID == workItemID {
			return s.ID
		}
	}
	return workItemID
}

func sortedItemIDs(v *view) []string {
	ids := make([]string, 0, len(v.g.Items))
	for id := range v.g.Items {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// same reports whether head already says b.
func (b contextBody) same(head *group.ContextHead) bool {
	if head == nil {
		return false
	}
	h := head.Package
	return slices.Equal(b.artifacts, []string(h.Artifacts)) && slices.Equal(b.constraints, []string(h.Constraints)) &&
		slices.Equal(b.questions, []string(h.OpenQuestions)) &&
		slices.EqualFunc(b.decisions, []protocol.Decision(h.Decisions), func(x, y protocol.Decision) bool {
			return x.Summary == y.Summary && slices.Equal(x.EventIDs, y.EventIDs)
		})
}

// contextDue reports whether w's package must be (re)published.
func contextDue(v *view, p *plan.Plan, w *group.WorkItem) bool {
	return !summarize(v, p, w).same(v.g.Contexts[contextID(w.WorkItemID)])
}

// contextPackage builds and signs the next version of w's package.
func (c *Coordinator) contextPackage(w *group.WorkItem, now time.Time) (protocol.ContextPackage, error) {
	v, p := c.v, c.cfg.Plan
	b := summarize(v, p, w)
	pkg := protocol.ContextPackage{
		PackageID: contextID(w.WorkItemID), Version: 1,
		Scope:        protocol.ContextScope{MissionID: p.Mission.ID, GroupID: p.Mission.GroupID, WorkItemID: w.WorkItemID},
		SourceEvents: protocol.EventRange{GroupID: p.Mission.GroupID, FromSequence: 1, ToSequence: v.lastSeq},
		Artifacts:    b.artifacts, Decisions: b.decisions, Constraints: b.constraints, OpenQuestions: b.questions,
		Generator:   protocol.Generator{AgentID: c.cfg.AgentID, AgentVersion: c.agentVersion},
		GeneratedAt: protocol.NewTime(now),
	}
	if head := v.g.Contexts[pkg.PackageID]; head != nil {
		pkg.Version = head.Package.Version + 1
		pkg.PreviousVersion = &protocol.PackageVersionRef{Version: head.Package.Version, Digest: head.Digest}
	}
	return protocol.SignContextPackage(pkg, c.cfg.Key)
}
