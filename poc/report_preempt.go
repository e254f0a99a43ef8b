package poc

import (
	"slices"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// PreemptionMoment is one cooperative preemption as it happened, each time
// read from its own evidence: the worker's log of the request (its
// preemption log, in observations.jsonl), the victim's checkpoint in the
// authority's log (the safe point), the end of its run in its slot (slot
// freed) and the start of the item it yielded to.
type PreemptionMoment struct {
	Group  string `json:"group"`
	Victim string `json:"victim"`
	Stage  string `json:"stage,omitempty"` // the victim's stage name
	For    string `json:"for"`             // the item it yielded its slot to
	// Phase is the step the victim was in when asked, from its
	// checkpoint's progress: the work between two safe points.
	Phase        string         `json:"phase,omitempty"`
	RunStartedAt protocol.Time  `json:"runStartedAt"`
	RequestedAt  protocol.Time  `json:"requestedAt"`
	SafePointAt  protocol.Time  `json:"safePointAt"`
	SlotFreedAt  *protocol.Time `json:"slotFreedAt,omitempty"`
	ForStartedAt *protocol.Time `json:"forStartedAt,omitempty"`
	// BusyMs is how long the victim's run had been going when asked, and
	// ToSafePointMs how long it then worked on to its next safe point: a
	// run parked at a safe point would show a ToSafePointMs of about 0.
	BusyMs        int64 `json:"busyMs"`
	ToSafePointMs int64 `json:"toSafePointMs"`
}

// ComputePreemptions lists the cooperative preemptions of a run: every
// checkpoint with reason preempted that follows a request of the worker's
// scheduler for that item (a shutdown's checkpoints have none). Pure.
func ComputePreemptions(logs map[string][]protocol.Event, obs []Observation, slots []SlotUsage, names map[string]string) []PreemptionMoment {
	type req struct {
		at   time.Time
		for_ string
	}
	asked := map[string][]req{} // group/item -> requests
	seen := map[string]bool{}
	for _, o := range obs {
		for _, p := range o.Preemptions {
			k := p.GroupID + "/" + p.WorkItemID
			if p.Reason != "scheduler" || seen[k+p.At.String()] {
				continue
			}
			seen[k+p.At.String()] = true
			f := p.For
			if i := strings.LastIndex(f, "/"); i >= 0 {
				f = f[i+1:]
			}
			asked[k] = append(asked[k], req{p.At, f})
		}
	}
	runs := map[string][]Interval{} // group/item -> its runs
	for _, s := range slots {
		for _, iv := range s.Intervals {
			runs[iv.Group+"/"+iv.Item] = append(runs[iv.Group+"/"+iv.Item], iv)
		}
	}
	out := []PreemptionMoment{}
	for _, g := range sortedGroupIDs(logs) {
		for _, e := range logs[g] {
			if e.Type != protocol.EvtWorkCheckpointed || e.Aggregate == nil {
				continue
			}
			p, err := group.Decode(e.Type, e.Payload)
			cp, ok := p.(*group.Checkpointed)
			if err != nil || !ok {
				continue
			}
			id, at := e.Aggregate.ID, e.OccurredAt.Time
			if cp.CheckpointReason != protocol.CheckpointPreempted {
				continue
			}
			var r *req
			for i, q := range asked[g+"/"+id] {
				if !q.at.After(at) && (r == nil || q.at.After(r.at)) {
					r = &asked[g+"/"+id][i]
				}
			}
			if r == nil {
				continue
			}
			m := PreemptionMoment{Group: g, Victim: id, Stage: names[g+"/"+id], For: r.for_,
				RequestedAt: protocol.NewTime(r.at), SafePointAt: protocol.NewTime(at), ToSafePointMs: at.Sub(r.at).Milliseconds()}
			if cp.Progress != nil {
				m.Phase = cp.Progress.Phase
			}
			// The run the request reached, and how it ended.
			for _, iv := range runs[g+"/"+id] {
				if !iv.From.After(r.at) && !iv.To.Before(at) {
					m.RunStartedAt = iv.From
					m.BusyMs = r.at.Sub(iv.From.Time).Milliseconds()
					if iv.Outcome == OutcomePreempted {
						m.SlotFreedAt = wireTimePtr(iv.To.Time)
					}
				}
			}
			var first time.Time
			for _, iv := range runs[g+"/"+r.for_] {
				if !iv.From.Before(r.at) && (first.IsZero() || iv.From.Before(first)) {
					first = iv.From.Time
				}
			}
			if !first.IsZero() {
				m.ForStartedAt = wireTimePtr(first)
			}
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b PreemptionMoment) int { return a.RequestedAt.Compare(b.RequestedAt.Time) })
	return out
}

func wireTimePtr(t time.Time) *protocol.Time {
	pt := protocol.NewTime(t)
	return &pt
}
