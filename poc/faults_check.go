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

// CheckFaults judges each fault from what happened: the durable stores,
// the workers' own counters and logs (st.Observations) and, for where and
// when to look, the journal (st.Journal). A fault with no journal record
// is not injected; one whose effect the stores, counters and logs do not
// show is not injected or did not hold, never taken on the driver's word.
func CheckFaults(names []FaultName, st RunStores) []FaultResult {
	inj, err := ReadJournal(st.Journal)
	var obs []Observation
	if err == nil {
		obs, err = ReadObservations(st.Observations)
	}
	out := make([]FaultResult, 0, len(names))
	for _, n := range names {
		if err != nil {
			out = append(out, FaultResult{Name: string(n), Detail: err.Error()})
			continue
		}
		out = append(out, CheckFault(n, st, inj, obs))
	}
	return out
}

// CheckFault judges one fault.
func CheckFault(n FaultName, st RunStores, journal []Injection, obs []Observation) FaultResult {
	var mine []Injection
	for _, in := range journal {
		if in.Fault == n {
			mine = append(mine, in)
		}
	}
	r := FaultResult{Name: string(n), Evidence: map[string]int64{}}
	if len(mine) == 0 {
		r.Detail = "not injected: no journal record"
		return r
	}
	var injected bool
	var problems []string
	var evidence string
	ev := r.Evidence
	switch n {
	case FaultDuplicateDelivery:
		injected, evidence, problems = checkDuplicates(st, mine, obs, ev)
	case FaultGroupDisconnect:
		injected, evidence, problems = checkDisconnect(st, mine, obs, ev)
	case FaultWorkerRestart:
		injected, evidence, problems = checkRestart(st, mine, ev)
	case FaultCoordinatorFailover:
		injected, evidence, problems = checkFailover(st, mine, ev)
	case FaultLeaseExpiry:
		injected, evidence, problems = checkLeaseExpiry(st, mine, ev)
	case FaultPriorityArrival:
		injected, evidence, problems = checkPreemption(st, mine, obs, ev)
	case FaultChangeRequest:
		injected, evidence, problems = checkChangeRequest(st, mine, ev)
	default:
		problems = []string{"unknown fault"}
	}
	r.Injected = injected
	r.Held = injected && len(problems) == 0
	switch {
	case !injected:
		if evidence != "" {
			problems = append(problems, evidence)
		}
		r.Detail = "not injected: " + strings.Join(problems, "; ")
	case len(problems) > 0:
		r.Detail = strings.Join(problems[:min(len(problems), maxDetailProblem)], "; ")
	default:
		r.Detail = evidence
	}
	return r
}

// beforeAfter returns a worker's observations at a fault's two moments.
func beforeAfter(obs []Observation, worker string, n FaultName) (Observation, Observation, error) {
	b, ok1 := findObservation(obs, worker, string(n)+momentBefore)
	a, ok2 := findObservation(obs, worker, string(n)+momentAfter)
	if !ok1 || !ok2 {
		return b, a, fmt.Errorf("no observation of %s before and after %s", worker, n)
	}
	return b, a, nil
}

// checkDuplicates: redelivered events reached the worker and its store
// dropped them as duplicates (its mwp_worker_events_total{result=
// "duplicate"} rose between the observations before and after); its
// store still applied every event once, in order.
func checkDuplicates(st RunStores, mine []Injection, obs []Observation, ev map[string]int64) (bool, string, []string) {
	var problems, text []string
	for _, in := range mine {
		b, a, err := beforeAfter(obs, in.Worker, FaultDuplicateDelivery)
		if err != nil {
			return false, "", []string{err.Error()}
		}
		n := int64(a.Counter(seriesDuplicates) - b.Counter(seriesDuplicates))
		ev["duplicatesDropped"] += n
		text = append(text, fmt.Sprintf("%s dropped %d redelivered %s events as duplicates", in.Worker, n, in.Group))
		if dir, ok := st.Workers[in.Worker]; !ok {
			problems = append(problems, "no store for worker "+in.Worker)
		} else if inv := CheckWorkerStores([]string{dir}); !inv.Held {
			problems = append(problems, inv.Detail)
		}
	}
	if ev["duplicatesDropped"] <= 0 {
		return false, fmt.Sprintf("no redelivered event reached the worker and was dropped as a duplicate (%s rose by %d)", seriesDuplicates, ev["duplicatesDropped"]), problems
	}
	return true, strings.Join(text, "; ") + "; every event applied once", problems
}

// checkDisconnect: the worker reconnected (mwp_worker_connections_total
// rose), commands it buffered while cut off were reconciled (its status
// log of reconciled commands, outcome applied) and its store caught up at
// least to the sequence current when it was back.
func checkDisconnect(st RunStores, mine []Injection, obs []Observation, ev map[string]int64) (bool, string, []string) {
	var problems, text []string
	for _, in := range mine {
		b, a, err := beforeAfter(obs, in.Worker, FaultGroupDisconnect)
		if err != nil {
			return false, "", []string{err.Error()}
		}
		re := int64(a.Counter(seriesConnections) - b.Counter(seriesConnections))
		rec := int64(a.ReconciledApplied() - b.ReconciledApplied())
		ev["reconnects"] += re
		ev["bufferedCommandsReconciled"] += rec
		text = append(text, fmt.Sprintf("%s reconnected %d time(s), %d buffered command(s) reconciled", in.Worker, re, rec))
		dir, ok := st.Workers[in.Worker]
		if !ok {
			problems = append(problems, "no store for worker "+in.Worker)
			continue
		}
		if c, err := groupCursor(dir, in.Group); err != nil {
			problems = append(problems, err.Error())
		} else if c < in.Sequence {
			problems = append(problems, fmt.Sprintf("%s %s: cursor %d, behind %d after reconnecting", in.Worker, in.Group, c, in.Sequence))
		}
	}
	if ev["reconnects"] <= 0 {
		return false, "the worker never lost its connection and reconnected (" + seriesConnections + " did not rise)", problems
	}
	if ev["bufferedCommandsReconciled"] <= 0 {
		problems = append(problems, "no command buffered offline during the cut was reconciled")
	}
	return true, strings.Join(text, "; "), problems
}

// groupCursor reads a Group's durable cursor from a worker's store.
func groupCursor(dir, groupID string) (uint64, error) {
	r, err := queue.OpenReader(dir, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	rep, err := r.Report()
	if err != nil {
		return 0, err
	}
	for _, g := range rep.Groups {
		if g.GroupID == groupID {
			return g.Cursor, nil
		}
	}
	return 0, nil
}

// checkRestart: after the restart the worker started runs again from the
// checkpoints its stopped process left (work.started naming one, > 0); no
// WorkItem was started while a run of it was still going; no change
// reached the integration repository under two keys; the rebuilt queue
// agrees with the authority on every WorkItem's state.
func checkRestart(st RunStores, mine []Injection, ev map[string]int64) (bool, string, []string) {
	var problems []string
	var since time.Time
	for _, in := range mine {
		if in.Since != nil && (since.IsZero() || in.Since.Before(since)) {
			since = in.Since.Time
		}
	}
	worker := mine[0].Worker
	groups := map[string]bool{}
	for _, m := range st.Missions {
		groups[m.GroupID] = true
	}
	for g := range groups {
		evs, _, err := readLog(st.Log, g)
		if err != nil {
			return false, "", []string{err.Error()}
		}
		running := map[string]bool{}
		for _, e := range evs {
			if e.Aggregate == nil || e.Aggregate.Kind != protocol.AggregateWorkItem {
				continue
			}
			payload, err := group.Decode(e.Type, e.Payload)
			if err != nil {
				continue
			}
			id := e.Aggregate.ID
			switch p := payload.(type) {
			case *group.Started:
				if running[id] {
					ev["concurrentRuns"]++
					problems = append(problems, fmt.Sprintf("%s/%d: %s started while a run of it was still going", g, e.Seq(), id))
				}
				running[id] = true
				if p.ResumeFromCheckpoint != "" && p.Lease != nil && p.Lease.AgentID == worker && !e.OccurredAt.Before(since) {
					ev["runsResumed"]++
				}
			case *group.Progressed:
				if p.Reason == group.ReasonSessionReplaced {
					running[id] = false
				}
			case *group.OfferCreated:
				if p.FencedOwnershipEpoch != nil {
					running[id] = false
				}
			case *group.Checkpointed, *group.Submitted, *group.Blocked, *group.Failed, *group.Cancelled:
				running[id] = false
			}
		}
		if dir, ok := st.Workers[worker]; ok {
			if r, err := queue.OpenReader(dir, 2*time.Second); err != nil {
				problems = append(problems, err.Error())
			} else {
				problems = append(problems, compareQueue(st.Log, r, g, worker)...)
				r.Close()
			}
		}
	}
	if st.Effects != "" {
		recs, err := ReadEffects(st.Effects)
		if err != nil {
			problems = append(problems, err.Error())
		}
		keys := map[string]map[string]bool{}
		for _, e := range recs.Effects {
			if keys[e.PatchDigest] == nil {
				keys[e.PatchDigest] = map[string]bool{}
			}
			keys[e.PatchDigest][e.Key] = true
		}
		for d, k := range keys {
			if len(k) > 1 {
				ev["effectsUnderTwoKeys"]++
				problems = append(problems, fmt.Sprintf("patch %s reached the integration repository under %d keys", shortDigest(d), len(k)))
			}
		}
	}
	if ev["runsResumed"] == 0 {
		problems = append(problems, fmt.Sprintf("0 runs resumed from a checkpoint after %s restarted", worker))
	}
	return true, fmt.Sprintf("%s restarted; %d run(s) resumed from a checkpoint, %d started while already running, %d change(s) under two keys; its rebuilt queue agrees with the authority",
		worker, ev["runsResumed"], ev["concurrentRuns"], ev["effectsUnderTwoKeys"]), problems
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
func checkFailover(st RunStores, mine []Injection, evc map[string]int64) (bool, string, []string) {
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
			problems = append(problems, fmt.Sprintf("no late command of the old coordinator %s refused with %s (its answer: %q)", in.Agent, protocol.CodeAuthStaleCoordinator, in.Code))
		} else {
			evc["staleCommandsRefused"]++
		}
		ev = append(ev, fmt.Sprintf("%s: epoch %d→%d at sequence %d; late command of %s refused %s", in.Group, from, to, fencedAt, in.Agent, in.Code))
	}
	return injected, strings.Join(ev, "; "), problems
}

// checkLeaseExpiry: the stalled owner's epoch was fenced by a new offer,
// the item was completed under a later epoch, and any result of the
// fenced epoch exists only among the late results.
func checkLeaseExpiry(st RunStores, mine []Injection, evc map[string]int64) (bool, string, []string) {
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
		nLate, codes := 0, []string{}
		for _, l := range late {
			if l.WorkItemID == in.WorkItem && l.OwnershipEpoch == in.Epoch && l.Actor.ID == in.Worker &&
				(l.Code == protocol.CodeWorkLeaseExpired || l.Code == protocol.CodeWorkStaleOwnership) {
				nLate++
				codes = append(codes, string(l.Code))
			}
		}
		evc["lateCommandsRefused"] += int64(nLate)
		evc["fencedEpoch"], evc["completedUnderEpoch"] = int64(in.Epoch), int64(completedBy)
		if nLate == 0 {
			problems = append(problems, fmt.Sprintf("no late command of the old owner %s under epoch %d was refused (%s or %s) and kept for audit",
				in.Worker, in.Epoch, protocol.CodeWorkLeaseExpired, protocol.CodeWorkStaleOwnership))
		}
		ev = append(ev, fmt.Sprintf("%s: %s's epoch %d fenced, completed under epoch %d; its late work.submit refused %s and kept for audit", in.WorkItem, in.Worker, in.Epoch, completedBy, strings.Join(codes, ", ")))
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
func checkPreemption(st RunStores, mine []Injection, obs []Observation, evc map[string]int64) (bool, string, []string) {
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
		// The worker's own log of the preemptions its scheduler asked for
		// the critical item: victim → when it was asked.
		asked := map[string]time.Time{}
		for _, o := range obs {
			for _, p := range o.Preemptions {
				if p.Reason == "scheduler" && strings.HasSuffix(p.For, in.WorkItem) && inWindow(p.At) {
					if t, ok := asked[p.WorkItemID]; !ok || p.At.Before(t) {
						asked[p.WorkItemID] = p.At
					}
				}
			}
		}
		evc["preemptionsRequested"] += int64(len(asked))
		for g, evs := range logs {
			preempted := map[string]string{} // item → checkpoint id
			resumed := map[string]bool{}
			final := map[string]protocol.WorkItemState{}
			at := map[string]time.Time{} // item → its preempted checkpoint's event
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
						at[id] = e.OccurredAt.Time
					}
				case *group.Started:
					if p.ResumeFromCheckpoint != "" && p.ResumeFromCheckpoint == preempted[id] {
						resumed[id] = true
					}
				}
			}
			for id, ck := range preempted {
				injected = true
				if t, ok := asked[id]; !ok {
					problems = append(problems, fmt.Sprintf("%s checkpointed as preempted, but the worker's log has no preemption request for it", id))
				} else if at[id].Before(t) {
					problems = append(problems, fmt.Sprintf("%s checkpointed as preempted before it was asked to", id))
				} else {
					evc["safePointsAfterRequest"]++
				}
				if !resumed[id] {
					problems = append(problems, fmt.Sprintf("%s was preempted at %s but never resumed from it", id, ck))
				}
				if final[id] != protocol.WorkVerified {
					problems = append(problems, fmt.Sprintf("%s ended %s after its preemption", id, final[id]))
				}
				ev = append(ev, fmt.Sprintf("%s/%s asked to yield for %s, reached a safe point %s later (checkpoint %s), resumed from it, %s",
					g, id, in.WorkItem, at[id].Sub(asked[id]).Round(time.Millisecond), ck, final[id]))
			}
		}
	}
	if !injected {
		return false, "no run was asked to yield and checkpointed with reason preempted between the critical item's arrival and its start", problems
	}
	slices.Sort(ev)
	return true, strings.Join(ev, "; "), problems
}

// reworkID matches the WorkItems ReworkStages names.
var reworkID = regexp.MustCompile(`-r[0-9]+$`)

// checkChangeRequest: the human requested changes, the coordinator had
// rework verified, resubmitted, and the human approved.
func checkChangeRequest(st RunStores, mine []Injection, evc map[string]int64) (bool, string, []string) {
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
				} else {
					evc["reworkVerified"]++
				}
			}
		}
		evc["changesRequested"]++
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
	return failoverCoordinator(ctx, j, owner, old, next, true)
}

// failoverCoordinator is FailoverCoordinator; without sendLate (a test's
// switched-off variant) the old coordinator sends nothing after it was
// replaced, and the journal has no refusal to show.
func failoverCoordinator(ctx context.Context, j *Journal, owner *authoritylite.Principal, old *Coordinator, next CoordinatorConfig, sendLate bool) (*Coordinator, error) {
	old.Stop()
	spec := old.cfg.Mission
	if err := AssignCoordinator(ctx, owner, spec, next.AgentID, next.LeaseDuration); err != nil {
		return nil, err
	}
	code := protocol.Code("")
	if sendLate {
		var pe *protocol.Error
		if late := old.Renew(ctx); errors.As(late, &pe) {
			code = pe.Code
		}
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
