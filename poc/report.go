package poc

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
)

// Report is the outcome of a PoC run (poc/REPORT.md documents every
// member). `mwp-worker poc --json` prints it as one JSON object; without
// --json it is rendered as terminal tables (WriteText), and WriteTimeline
// draws its slots and approvals as an SVG picture.
type Report struct {
	Missions   []MissionReport   `json:"missions"`
	Faults     []FaultResult     `json:"faults"`
	Invariants []InvariantResult `json:"invariants"`
	Slots      []SlotUsage       `json:"slots"`
	Groups     []GroupShare      `json:"groups"`
	Approvals  []ApprovalMoment  `json:"approvals"`
	// Injections are the fault journal's records: each fault really
	// caused, when and where (the timeline marks them).
	Injections []Injection `json:"injections"`
	// Contention is the window in which every Group had work waiting, with
	// each Group's share of slot-time in it (nil: there was none).
	Contention *Contention `json:"contention,omitempty"`
	// Preemptions are the cooperative preemptions of the run, each from
	// request to the start of the item it made room for.
	Preemptions []PreemptionMoment `json:"preemptions"`
}

// MissionReport is one Mission's final state and its stage timeline.
type MissionReport struct {
	ID         string        `json:"id"`
	Group      string        `json:"group"`
	FinalState string        `json:"finalState"`
	Stages     []StageReport `json:"stages"`
}

// StageReport is one WorkItem of a Mission graph. StartedAt is its first
// start, FinishedAt its terminal transition; Worker and Slot name where it
// last ran. All four are absent for a stage that never ran.
type StageReport struct {
	WorkItemID string         `json:"workItemId"`
	Name       string         `json:"name"`
	State      string         `json:"state"`
	StartedAt  *protocol.Time `json:"startedAt,omitempty"`
	FinishedAt *protocol.Time `json:"finishedAt,omitempty"`
	Worker     string         `json:"worker,omitempty"`
	Slot       *int           `json:"slot,omitempty"`
	// Handler is the language of the handler that runs the stage: python
	// (an external handler on the shipped helper) or go.
	Handler string `json:"handler"`
}

// FaultResult says whether a fault of the spec 22 suite was injected and
// whether the protocol's guarantees held through it.
type FaultResult struct {
	Name     string `json:"name"`
	Injected bool   `json:"injected"`
	Held     bool   `json:"held"`
	Detail   string `json:"detail"`
	// Evidence are the counts the verdict rests on, read from the stores,
	// the workers' counters and logs (poc/REPORT.md lists them per fault).
	Evidence map[string]int64 `json:"evidence"`
}

// InvariantResult is one invariant checked over the whole run.
type InvariantResult struct {
	Name   string `json:"name"`
	Held   bool   `json:"held"`
	Detail string `json:"detail"`
}

// SlotUsage is one execution slot's occupancy over time: every run of a
// WorkItem in it, in time order.
type SlotUsage struct {
	Worker    string     `json:"worker"`
	Slot      int        `json:"slot"`
	Intervals []Interval `json:"intervals"`
}

// Interval is one run of a WorkItem in a slot, from start (execution lease
// granted) to the moment the slot was free again.
type Interval struct {
	Item    string        `json:"item"`
	Group   string        `json:"group"`
	From    protocol.Time `json:"from"`
	To      protocol.Time `json:"to"`
	Outcome Outcome       `json:"outcome"`
}

// Outcome says how a run in a slot ended.
type Outcome string

// The run outcomes.
const (
	OutcomeSubmitted   Outcome = "submitted"     // work.submit accepted
	OutcomePreempted   Outcome = "preempted"     // checkpointed at a safe point and requeued
	OutcomeFailed      Outcome = "failed"        // the handler reported failure
	OutcomeExpired     Outcome = "lease_expired" // the execution lease lapsed
	OutcomeInterrupted Outcome = "interrupted"   // the worker stopped (crash or restart)
	OutcomeRunning     Outcome = "running"       // still running when the report was taken
)

// GroupShare is one Group's service against its weight (see ComputeGroups).
type GroupShare struct {
	ID          string  `json:"id"`
	Weight      int64   `json:"weight"`
	SlotMs      int64   `json:"slotMs"`
	Share       float64 `json:"share"`
	WeightShare float64 `json:"weightShare"`
	Runs        int     `json:"runs"`
	Waits       int     `json:"waits"`
	WaitP50Ms   int64   `json:"waitP50Ms"`
	WaitMaxMs   int64   `json:"waitMaxMs"`
	Preemptions int     `json:"preemptions"`
}

// ApprovalMoment is a human decision on a Mission, drawn on the timeline.
type ApprovalMoment struct {
	Mission  string        `json:"mission"`
	Group    string        `json:"group"`
	At       protocol.Time `json:"at"`
	Decision string        `json:"decision"` // approved | changes_requested
}

// OK reports whether the run passed: every chosen fault was injected and
// held, and every invariant held. A fault that was not injected fails the
// run: what was not exercised was not demonstrated.
func (r *Report) OK() bool { return len(r.Problems()) == 0 }

// Problems lists, one line each, why the run did not pass: each chosen
// fault not injected or not held, then each invariant that did not hold.
func (r *Report) Problems() []string {
	var out []string
	for _, f := range r.Faults {
		switch {
		case !f.Injected:
			out = append(out, "fault "+f.Name+" not injected: "+strings.TrimPrefix(f.Detail, "not injected: "))
		case !f.Held:
			out = append(out, "fault "+f.Name+" did not hold: "+f.Detail)
		}
	}
	for _, inv := range r.Invariants {
		if !inv.Held {
			out = append(out, "invariant "+inv.Name+" did not hold: "+inv.Detail)
		}
	}
	if r.Contention == nil && len(r.Groups) > 1 {
		out = append(out, "contention not shown: no span in which every Group had work waiting")
	}
	if c := r.Contention; c != nil && !c.Within {
		for _, g := range c.Groups {
			if d := g.SlotShare - g.WeightShare; d > ContentionTolerance || d < -ContentionTolerance {
				out = append(out, fmt.Sprintf("contention not fair: %s had %.3f of the slot-time against a weight share of %.3f (more than %.0f points off)",
					g.GroupID, g.SlotShare, g.WeightShare, ContentionTolerance*100))
			}
		}
	}
	return out
}

// reportJSON is the written shape: the verdict first, then the report.
type reportJSON struct {
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
	*Report
}

// WriteJSON writes r as one indented JSON object and a newline, with the
// verdict ("ok", and "problems" as Problems lists them). Empty lists are
// written as [], never null.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	n := r.normalized()
	return enc.Encode(reportJSON{OK: n.OK(), Problems: nonNil(n.Problems()), Report: n})
}

// normalized returns a copy whose nil slices are empty, so the JSON shape
// does not depend on whether a list happened to be empty.
func (r *Report) normalized() *Report {
	c := *r
	c.Missions = nonNil(c.Missions)
	for i := range c.Missions {
		c.Missions[i].Stages = nonNil(c.Missions[i].Stages)
	}
	c.Faults = nonNil(c.Faults)
	for i := range c.Faults {
		if c.Faults[i].Evidence == nil {
			c.Faults[i].Evidence = map[string]int64{}
		}
	}
	c.Invariants = nonNil(c.Invariants)
	c.Slots = nonNil(c.Slots)
	for i := range c.Slots {
		c.Slots[i].Intervals = nonNil(c.Slots[i].Intervals)
	}
	c.Groups = nonNil(c.Groups)
	c.Approvals = nonNil(c.Approvals)
	c.Injections = nonNil(c.Injections)
	c.Preemptions = nonNil(c.Preemptions)
	if c.Contention != nil {
		cc := *c.Contention
		cc.Groups = nonNil(cc.Groups)
		c.Contention = &cc
	}
	return &c
}

func nonNil[T any](s []T) []T {
	if len(s) == 0 {
		return []T{}
	}
	return append([]T(nil), s...)
}
