package poc

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// CheckFaults judges each fault from the durable stores and the journal
// (st.Journal). A fault with no journal record, or whose effect the log
// does not show, is reported as not injected.
func CheckFaults(names []FaultName, st RunStores) []FaultResult {
	inj, err := ReadJournal(st.Journal)
	out := make([]FaultResult, 0, len(names))
	for _, n := range names {
		if err != nil {
			out = append(out, FaultResult{Name: string(n), Detail: err.Error()})
			continue
		}
		out = append(out, CheckFault(n, st, inj))
	}
	return out
}

// CheckFault judges one fault.
func CheckFault(n FaultName, st RunStores, journal []Injection) FaultResult {
	var mine []Injection
	for _, in := range journal {
		if in.Fault == n {
			mine = append(mine, in)
		}
	}
	r := FaultResult{Name: string(n)}
	if len(mine) == 0 {
		r.Detail = "not injected: no journal record"
		return r
	}
	var injected bool
	var problems []string
	var evidence string
	switch n {
	case FaultDuplicateDelivery, FaultGroupDisconnect, FaultWorkerRestart:
		injected, evidence, problems = checkWorkerFault(n, st, mine)
	case FaultCoordinatorFailover:
		injected, evidence, problems = checkFailover(st, mine)
	case FaultLeaseExpiry:
		injected, evidence, problems = checkLeaseExpiry(st, mine)
	case FaultPriorityArrival:
		injected, evidence, problems = checkPreemption(st, mine)
	case FaultChangeRequest:
		injected, evidence, problems = checkChangeRequest(st, mine)
	default:
		problems = []string{"unknown fault"}
	}
	r.Injected = injected
	r.Held = injected && len(problems) == 0
	switch {
	case !injected:
		r.Detail = "not injected: " + strings.Join(append(problems, evidence), "; ")
	case len(problems) > 0:
		r.Detail = strings.Join(problems[:min(len(problems), maxDetailProblem)], "; ")
	default:
		r.Detail = evidence
	}
	return r
}

// checkWorkerFault: the worker's store applied every event once, in
// order, and caught up (disconnect: at least to the sequence current at
// reconnection); after a restart its rebuilt queue agrees with the
// authority on every WorkItem's state.
func checkWorkerFault(n FaultName, st RunStores, mine []Injection) (bool, string, []string) {
	var problems []string
	var ev []string
	for _, in := range mine {
		dir, ok := st.Workers[in.Worker]
		if !ok {
			return false, "", []string{"no store for worker " + in.Worker}
		}
		if inv := CheckWorkerStores([]string{dir}); !inv.Held {
			problems = append(problems, inv.Detail)
		}
		r, err := queue.OpenReader(dir, 2*time.Second)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		rep, err := r.Report()
		if err != nil {
			r.Close()
			problems = append(problems, err.Error())
			continue
		}
		for _, g := range rep.Groups {
			if in.Group != "" && g.GroupID != in.Group {
				continue
			}
			if n == FaultGroupDisconnect && g.Cursor < in.Sequence {
				problems = append(problems, fmt.Sprintf("%s %s: cursor %d, behind %d after reconnecting", in.Worker, g.GroupID, g.Cursor, in.Sequence))
			}
			if n == FaultWorkerRestart {
				problems = append(problems, compareQueue(st.Log, r, g.GroupID, in.Worker)...)
			}
			ev = append(ev, fmt.Sprintf("%s %s cursor %d", in.Worker, g.GroupID, g.Cursor))
		}
		r.Close()
	}
	what := map[FaultName]string{FaultDuplicateDelivery: "redelivered events dropped as duplicates", FaultGroupDisconnect: "reconnected and caught up",
		FaultWorkerRestart: "queue rebuilt from its store agrees with the authority"}[n]
	return true, fmt.Sprintf("%d injection(s); %s: %s", len(mine), what, strings.Join(ev, ", ")), problems
}

// compareQueue compares a worker's queue projection with the WorkItem
// states the authority's log ends with.
func compareQueue(log EventLog, r *queue.Reader, group, worker string) []string {
	want, err := finalStates(log, group)
	if err != nil {
		return []string{err.Error()}
	}
	items, err := r.Items(group)
	if err != nil {
		return []string{err.Error()}
	}
	var p []string
	for _, e := range items {
		if w, ok := want[e.WorkItemID]; ok && w != e.State {
			p = append(p, fmt.Sprintf("%s %s: queue says %s, authority %s", worker, e.WorkItemID, e.State, w))
		}
	}
	if len(items) < len(want) {
		p = append(p, fmt.Sprintf("%s %s: queue holds %d of %d WorkItems", worker, group, len(items), len(want)))
	}
	return p
}

// finalStates folds a Group's log to each WorkItem's last state.
func finalStates(log EventLog, groupID string) (map[string]protocol.WorkItemState, error) {
	evs, _, err := readLog(log, groupID)
	if err != nil {
		return nil, err
	}
	out := map[string]protocol.WorkItemState{}
	for _, ev := range evs {
		if ev.Aggregate == nil || ev.Aggregate.Kind != protocol.AggregateWorkItem {
			continue
		}
		payload, err := group.Decode(ev.Type, ev.Payload)
		if wp, ok := payload.(group.WorkPayload); err == nil && ok {
			out[ev.Aggregate.ID] = wp.Ref().State
		}
	}
	return out, nil
}

// checkFailover: the log shows a reassignment that fenced an epoch; no
// event after it was caused by the old coordinator; its late command was
// refused with AUTH_STALE_COORDINATOR.
func checkFailover(st RunStores, mine []Injection) (bool, string, []string) {
	var problems, ev []string
	injected := false
	for _, in := range mine {
		evs, _, err := readLog(st.Log, in.Group)
		if err != nil {
			return false, "", []string{err.Error()}
		}
		fencedAt := uint64(0)
		var from, to uint64
		for _, e := range evs {
			if e.Type != protocol.EvtMissionCoordinatorAssigned {
				continue
			}
			p, err := group.DecodeAs[group.CoordinatorAssigned](&e)
			if err == nil && p.PreviousCoordinatorEpoch != nil && p.Coordinator != nil && p.Coordinator.AgentID != in.Agent {
				fencedAt, from, to = e.Seq(), *p.PreviousCoordinatorEpoch, p.Coordinator.CoordinatorEpoch
			}
		}
		if fencedAt == 0 {
			problems = append(problems, in.Group+": no reassignment away from "+in.Agent+" in the log")
			continue
		}
		injected = true
		for _, e := range evs {
			if e.Seq() > fencedAt && e.Actor.ID == in.Agent {
				problems = append(problems, fmt.Sprintf("%s/%d: %s by the fenced coordinator %s", in.Group, e.Seq(), e.Type, in.Agent))
			}
		}
		if in.Code != protocol.CodeAuthStaleCoordinator {
			problems = append(problems, fmt.Sprintf("the late command of %s got %q, want %s", in.Agent, in.Code, protocol.CodeAuthStaleCoordinator))
		}
		ev = append(ev, fmt.Sprintf("%s: epoch %d→%d at sequence %d; late command of %s refused %s", in.Group, from, to, fencedAt, in.Agent, in.Code))
	}
	return injected, strings.Join(ev, "; "), problems
}

// checkLeaseExpiry: the stalled owner's epoch was fenced by a new offer,
// the item was completed under a later epoch, and any result of the
// fenced epoch exists only among the late results.
func checkLeaseExpiry(st RunStores, mine []Injection) (bool, string, []string) {
	var problems, ev []string
	injected := false
	late, err := st.Log.LateResults()
	if err != nil {
		return false, "", []string{err.Error()}
	}
	for _, in := range mine {
		evs, _, err := readLog(st.Log, in.Group)
		if err != nil {
			return false, "", []string{err.Error()}
		}
		fenced, completedBy := false, uint64(0)
		var lastEpoch uint64
		for _, e := range evs {
			if e.Aggregate == nil || e.Aggregate.ID != in.WorkItem {
				continue
			}
			payload, err := group.Decode(e.Type, e.Payload)
			if err != nil {
				continue
			}
			switch p := payload.(type) {
			case *group.OfferCreated:
				if p.FencedOwnershipEpoch != nil && *p.FencedOwnershipEpoch == in.Epoch {
					fenced = true
				}
			case *group.Submitted:
				if p.Ownership != nil {
					lastEpoch = p.Ownership.OwnershipEpoch
				}
			case *group.ResultAccepted:
				completedBy = lastEpoch
			}
		}
		if !fenced {
			problems = append(problems, fmt.Sprintf("%s: epoch %d was never fenced by a new offer", in.WorkItem, in.Epoch))
			continue
		}
		injected = true
		if completedBy <= in.Epoch {
			problems = append(problems, fmt.Sprintf("%s completed under epoch %d, not a later one than the stalled %d", in.WorkItem, completedBy, in.Epoch))
		}
		nLate := 0
		for _, l := range late {
			if l.WorkItemID == in.WorkItem && l.OwnershipEpoch == in.Epoch {
				nLate++
			}
		}
		ev = append(ev, fmt.Sprintf("%s: %s's epoch %d fenced, completed under epoch %d; %d late result(s) kept for audit", in.WorkItem, in.Worker, in.Epoch, completedBy, nLate))
	}
	return injected, strings.Join(ev, "; "), problems
}

// checkPreemption: the critical item (the journal's WorkItem) arrived
// while the slots were busy, and a running item checkpointed with reason
// preempted between its arrival and its first start, so that it got the
// slot: that is the injection. It held when the critical item then
// started and every such victim was started again from that checkpoint
// and ended verified. Preemptions outside the window (a worker's
// shutdown checkpoints its runs the same way) do not count.
func checkPreemption(st RunStores, mine []Injection) (bool, string, []string) {
	var problems, ev []string
	injected := false
	groups := map[string]bool{}
	for _, m := range st.Missions {
		groups[m.GroupID] = true
	}
	for _, in := range mine {
		groups[in.Group] = true
	}
	logs := map[string][]protocol.Event{}
	for g := range groups {
		evs, _, err := readLog(st.Log, g)
		if err != nil {
			return false, "", []string{err.Error()}
		}
		logs[g] = evs
	}
	for _, in := range mine {
		// The critical item's arrival and first start.
		var arrived, started time.Time
		for _, e := range logs[in.Group] {
			if e.Aggregate == nil || e.Aggregate.ID != in.WorkItem {
				continue
			}
			if arrived.IsZero() {
				arrived = e.OccurredAt.Time
			}
			if e.Type == protocol.EvtWorkStarted && started.IsZero() {
				started = e.OccurredAt.Time
			}
		}
		if arrived.IsZero() {
			return false, fmt.Sprintf("critical item %s is not in %s's log", in.WorkItem, in.Group), nil
		}
		if started.IsZero() {
			problems = append(problems, fmt.Sprintf("critical item %s never started", in.WorkItem))
		}
		inWindow := func(t time.Time) bool { return !t.Before(arrived) && (started.IsZero() || !t.After(started)) }
		for g, evs := range logs {
			preempted := map[string]string{} // item → checkpoint id
			resumed := map[string]bool{}
			final := map[string]protocol.WorkItemState{}
			for _, e := range evs {
				if e.Aggregate == nil || e.Aggregate.Kind != protocol.AggregateWorkItem {
					continue
				}
				payload, err := group.Decode(e.Type, e.Payload)
				if err != nil {
					continue
				}
				id := e.Aggregate.ID
				if wp, ok := payload.(group.WorkPayload); ok {
					final[id] = wp.Ref().State
				}
				switch p := payload.(type) {
				case *group.Checkpointed:
					if p.CheckpointReason == protocol.CheckpointPreempted && p.Checkpoint != nil && id != in.WorkItem && inWindow(e.OccurredAt.Time) {
						preempted[id] = p.Checkpoint.CheckpointID
					}
				case *group.Started:
					if p.ResumeFromCheckpoint != "" && p.ResumeFromCheckpoint == preempted[id] {
						resumed[id] = true
					}
				}
			}
			for id, ck := range preempted {
				injected = true
				if !resumed[id] {
					problems = append(problems, fmt.Sprintf("%s was preempted at %s but never resumed from it", id, ck))
				}
				if final[id] != protocol.WorkVerified {
					problems = append(problems, fmt.Sprintf("%s ended %s after its preemption", id, final[id]))
				}
				ev = append(ev, fmt.Sprintf("%s/%s preempted for %s at checkpoint %s, resumed from it, %s", g, id, in.WorkItem, ck, final[id]))
			}
		}
	}
	if !injected {
		return false, "no work.checkpointed with reason preempted between the critical item's arrival and its start", problems
	}
	slices.Sort(ev)
	return true, strings.Join(ev, "; "), problems
}

// reworkID matches the WorkItems ReworkStages names.
var reworkID = regexp.MustCompile(`-r[0-9]+$`)

// checkChangeRequest: the human requested changes, the coordinator had
// rework verified, resubmitted, and the human approved.
func checkChangeRequest(st RunStores, mine []Injection) (bool, string, []string) {
	var problems, ev []string
	injected := false
	for _, in := range mine {
		evs, _, err := readLog(st.Log, in.Group)
		if err != nil {
			return false, "", []string{err.Error()}
		}
		var requested, resubmitted, approved uint64
		for _, e := range evs {
			switch e.Type {
			case protocol.EvtMissionChangesRequested:
				requested = e.Seq()
			case protocol.EvtMissionSubmittedForApproval:
				if requested > 0 {
					resubmitted = e.Seq()
				}
			case protocol.EvtMissionApproved:
				approved = e.Seq()
			}
		}
		if requested == 0 {
			problems = append(problems, in.Group+": no mission.changes_requested in the log")
			continue
		}
		injected = true
		states, _ := finalStates(st.Log, in.Group)
		rework := 0
		for id, s := range states {
			if reworkID.MatchString(id) {
				rework++
				if s != protocol.WorkVerified {
					problems = append(problems, fmt.Sprintf("rework %s is %s", id, s))
				}
			}
		}
		if rework == 0 || resubmitted <= requested || approved <= resubmitted {
			problems = append(problems, fmt.Sprintf("%s: changes at %d, %d rework items, resubmitted at %d, approved at %d", in.Group, requested, rework, resubmitted, approved))
		}
		ev = append(ev, fmt.Sprintf("%s: changes requested at %d, %d rework items verified, resubmitted at %d, approved at %d", in.Group, requested, rework, resubmitted, approved))
	}
	return injected, strings.Join(ev, "; "), problems
}

// FailoverCoordinator injects coordinator-failover for in-process
// coordinators: it stops old, has the owner assign next's agent (a higher
// epoch), sends one late command of old, and journals the result. Run
// next afterwards.
func FailoverCoordinator(ctx context.Context, j *Journal, owner *authoritylite.Principal, old *Coordinator, next CoordinatorConfig) (*Coordinator, error) {
	old.Stop()
	spec := old.cfg.Mission
	if err := AssignCoordinator(ctx, owner, spec, next.AgentID, next.LeaseDuration); err != nil {
		return nil, err
	}
	late := old.Renew(ctx)
	var pe *protocol.Error
	code := protocol.Code("")
	if errors.As(late, &pe) {
		code = pe.Code
	}
	if err := j.Record(Injection{Fault: FaultCoordinatorFailover, At: protocol.NewTime(old.cfg.Service.Now()), Agent: old.cfg.AgentID,
		Group: spec.GroupID, Code: code, Detail: fmt.Sprintf("replaced by %s", next.AgentID)}); err != nil {
		return nil, err
	}
	return NewCoordinator(next)
}

// RequestChanges injects change-request: the owner requests changes on a
// Mission awaiting approval; the coordinator reworks and resubmits.
func RequestChanges(ctx context.Context, j *Journal, owner *authoritylite.Principal, spec MissionSpec, changes []string, comment string, at time.Time) error {
	if _, err := owner.Do(ctx, protocol.CmdMissionRequestChanges, spec.GroupID, &protocol.RequestChangesPayload{
		MissionID: spec.MissionID, Changes: changes, Comment: comment}); err != nil {
		return err
	}
	return j.Record(Injection{Fault: FaultChangeRequest, At: protocol.NewTime(at), Group: spec.GroupID, Detail: strings.Join(changes, "; ")})
}
