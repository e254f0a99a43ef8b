package workercmd

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// progress turns a Mission's log into `up`'s progress lines (docs/shapes.md):
//
//	mission ID STATE
//	stage ID STATE [AGENT]
//
// one line per state change, the agent named while one owns the stage. It
// folds the log with group.Fold, the state machine the authority runs.
type progress struct {
	g *group.Group
}

// apply folds one signed event; it returns the lines to print, the
// Mission's state when this event changed it, and a closing reason.
func (p *progress) apply(pl *plan.Plan, raw []byte) (lines []string, mission protocol.MissionState, reason string, err error) {
	if p.g == nil {
		p.g = group.NewGroup(pl.Mission.GroupID, group.Limits{})
	}
	var ev protocol.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, "", "", err
	}
	if _, known := group.Events[ev.Type]; !known {
		return nil, "", "", nil
	}
	fe, err := group.FromWire(&ev)
	if err != nil {
		return nil, "", "", err
	}
	var before protocol.MissionState
	if p.g.Mission != nil {
		before = p.g.Mission.State
	}
	var prev protocol.WorkItemState
	wp, isWork := fe.Payload.(group.WorkPayload)
	if isWork {
		if w := p.g.Items[wp.Ref().WorkItemID]; w != nil {
			prev = w.State
		}
	}
	if err := p.g.Fold(fe); err != nil {
		return nil, "", "", err
	}
	if m := p.g.Mission; m != nil && m.State != before {
		mission = m.State
		lines = append(lines, fmt.Sprintf("mission %s %s", m.MissionID, m.State))
		if c, ok := fe.Payload.(*group.MissionClosed); ok {
			reason = c.Reason
		}
	}
	if !isWork {
		return lines, mission, reason, nil
	}
	if w := p.g.Items[wp.Ref().WorkItemID]; w != nil && w.State != prev {
		line := fmt.Sprintf("stage %s %s", stageID(pl, w.WorkItemID), w.State)
		if w.Ownership != nil && (w.State == protocol.WorkQueued || w.State == protocol.WorkActive || w.State == protocol.WorkSubmitted) {
			line += " " + w.Ownership.OwnerAgentID
		}
		lines = append(lines, line)
	}
	return lines, mission, reason, nil
}

// retryLine is `up`'s progress line for a failed attempt the stage's
// retry policy runs again: the authority's log never shows it.
func retryLine(p *plan.Plan, r slots.Retry) string {
	return fmt.Sprintf("stage %s retrying: attempt %d failed: %s", stageID(p, r.Slot.WorkItemID), r.Attempt, OneLine(fmt.Sprint(r.Err)))
}

// stageID is the plan's stage id of a WorkItem (its id after the Mission's).
func stageID(p *plan.Plan, workItemID string) string {
	return strings.TrimPrefix(workItemID, p.Mission.ID+":")
}
