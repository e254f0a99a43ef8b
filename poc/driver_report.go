package poc

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// classWeight mirrors the worker scheduler's organization priority classes
// (scheduler.classMultiplier) for a Group of weight 1.
func classWeight(c protocol.PriorityClass) int64 {
	switch c {
	case protocol.PriorityLow:
		return 1
	case protocol.PriorityHigh:
		return 4
	case protocol.PriorityCritical:
		return 8
	}
	return 2
}

// report reopens the authority's log after the run and derives the whole
// report from durable stores: missions and stages, slot occupancy, Group
// shares, approvals, invariants and faults; then writes the timeline.
func (r *run) report(start, end time.Time) (*Report, error) {
	svc, err := authoritylite.Open(authoritylite.Config{Dir: r.path("authority")})
	if err != nil {
		return nil, fmt.Errorf("poc: reopen the authority log: %w", err)
	}
	defer svc.Close()
	workers := map[string]string{}
	for _, id := range r.workerIDs() {
		workers[id] = r.path("workers", id)
	}
	st := RunStores{Log: svc, Missions: r.specs, Workers: workers, Effects: r.path(EffectsFile), Journal: r.path(JournalFile),
		Observations: r.path(ObservationsFile)}
	rep := &Report{Missions: []MissionReport{}, Faults: []FaultResult{}, Invariants: []InvariantResult{}, Slots: []SlotUsage{}, Groups: []GroupShare{}, Approvals: []ApprovalMoment{}}
	rep.Invariants = append(CheckInvariants(st), checkCredentialScope(svc, r.missionGroups()))
	if len(r.opts.Faults) > 0 {
		rep.Faults = CheckFaults(r.opts.Faults, st)
		// A journal that cannot be read is already a fault problem above.
		rep.Injections, _ = ReadJournal(st.Journal)
	}
	runs := map[string][]*Interval{} // worker -> runs
	var arrivals []Arrival
	weights := map[string]int64{}
	for _, spec := range r.specs {
		weights[spec.GroupID] = classWeight(spec.PriorityClass)
		mr, err := r.missionReport(svc, spec, runs, &arrivals, rep, end)
		if err != nil {
			return nil, err
		}
		rep.Missions = append(rep.Missions, mr)
	}
	rep.Slots = assignSlots(runs, r.workerIDs(), slotsPerWk)
	// Each stage names the worker and slot of its last run.
	where := map[string]struct {
		worker string
		slot   int
	}{}
	for _, su := range rep.Slots {
		for _, iv := range su.Intervals {
			where[iv.Group+"/"+iv.Item] = struct {
				worker string
				slot   int
			}{su.Worker, su.Slot}
		}
	}
	for i := range rep.Missions {
		for j := range rep.Missions[i].Stages {
			st := &rep.Missions[i].Stages[j]
			if w, ok := where[rep.Missions[i].Group+"/"+st.WorkItemID]; ok {
				slot := w.slot
				st.Worker, st.Slot = w.worker, &slot
			}
		}
	}
	rep.Groups = ComputeGroups(rep.Slots, arrivals, weights, end)
	origin, _ := rep.Span()
	rep.Contention = ComputeContention(rep.Slots, arrivals, weights, origin, end)
	logs := map[string][]protocol.Event{}
	for _, g := range r.missionGroups() {
		if logs[g], _, err = readLog(svc, g); err != nil {
			return nil, err
		}
	}
	// Observations that cannot be read are a fault problem already; the
	// preemptions then list none.
	obs, _ := ReadObservations(st.Observations)
	rep.Preemptions = ComputePreemptions(logs, obs, rep.Slots, stageNames(rep))
	if err := WriteTimeline(r.path("timeline.svg"), rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// missionReport reads one Mission's log: stage timeline, runs (from each
// execution lease to what ended it), arrivals and approvals.
func (r *run) missionReport(svc *authoritylite.Service, spec MissionSpec, runs map[string][]*Interval, arrivals *[]Arrival, rep *Report, end time.Time) (MissionReport, error) {
	mr := MissionReport{ID: spec.MissionID, Group: spec.GroupID, Stages: []StageReport{}}
	if m, ok := svc.Mission(spec.GroupID); ok {
		mr.FinalState = string(m.State)
	}
	evs, err := svc.Events(spec.GroupID, 0, 0)
	if err != nil {
		return mr, err
	}
	open := map[string]*Interval{} // workItemId -> running interval
	owner := map[string]string{}
	firstStart, verified := map[string]protocol.Time{}, map[string]protocol.Time{}
	closeRun := func(item string, at protocol.Time, o Outcome) {
		if iv := open[item]; iv != nil {
			iv.To, iv.Outcome = at, o
			delete(open, item)
		}
	}
	for _, se := range evs {
		var ev protocol.Event
		if err := json.Unmarshal(se.Raw, &ev); err != nil {
			return mr, err
		}
		switch ev.Type {
		case protocol.EvtMissionApproved, protocol.EvtMissionChangesRequested:
			d := "approved"
			if ev.Type == protocol.EvtMissionChangesRequested {
				d = "changes_requested"
			}
			rep.Approvals = append(rep.Approvals, ApprovalMoment{Mission: spec.MissionID, Group: spec.GroupID, At: ev.OccurredAt, Decision: d})
			continue
		}
		if ev.Aggregate == nil || ev.Aggregate.Kind != protocol.AggregateWorkItem {
			continue
		}
		payload, err := group.Decode(ev.Type, ev.Payload)
		if err != nil {
			continue
		}
		item := ev.Aggregate.ID
		switch p := payload.(type) {
		case *group.OfferAccepted:
			if p.Ownership != nil {
				owner[item] = p.Ownership.OwnerAgentID
			}
			*arrivals = append(*arrivals, Arrival{Item: item, Group: spec.GroupID, At: ev.OccurredAt.Time})
		case *group.Started:
			if p.Lease == nil {
				continue
			}
			closeRun(item, ev.OccurredAt, OutcomeInterrupted)
			iv := &Interval{Item: item, Group: spec.GroupID, From: ev.OccurredAt, Outcome: OutcomeRunning}
			open[item] = iv
			runs[p.Lease.AgentID] = append(runs[p.Lease.AgentID], iv)
			if _, ok := firstStart[item]; !ok {
				firstStart[item] = ev.OccurredAt
			}
		case *group.Checkpointed:
			if p.Reason != "offline_reconciled" {
				closeRun(item, ev.OccurredAt, OutcomePreempted)
			}
		case *group.Submitted, *group.Blocked:
			closeRun(item, ev.OccurredAt, OutcomeSubmitted)
		case *group.Failed, *group.Cancelled:
			closeRun(item, ev.OccurredAt, OutcomeFailed)
		case *group.Progressed:
			if p.Reason == "session_replaced" {
				closeRun(item, ev.OccurredAt, OutcomeInterrupted)
			}
		case *group.OfferCreated:
			if p.FencedOwnershipEpoch != nil {
				closeRun(item, ev.OccurredAt, OutcomeExpired)
			}
		case *group.ResultAccepted:
			verified[item] = ev.OccurredAt
		}
	}
	for item, iv := range open {
		iv.To = protocol.NewTime(end)
		delete(open, item)
	}
	for _, s := range spec.WorkStages() {
		sr := StageReport{WorkItemID: s.WorkItemID, Name: s.Name, Worker: owner[s.WorkItemID], Handler: HandlerLanguage(s.Kind, r.python)}
		if w, ok := svc.WorkItem(spec.GroupID, s.WorkItemID); ok {
			sr.State = string(w.State)
		} else {
			sr.State = "not created"
		}
		if t, ok := firstStart[s.WorkItemID]; ok {
			sr.StartedAt = &t
		}
		if t, ok := verified[s.WorkItemID]; ok {
			sr.FinishedAt = &t
		}
		mr.Stages = append(mr.Stages, sr)
	}
	// Then the WorkItems added while the Mission ran (the critical hotfix,
	// a change request's rework stages), in the order they first started:
	// every stage that ran is named, with its handler's language.
	inGraph := map[string]bool{}
	for _, s := range spec.WorkStages() {
		inGraph[s.WorkItemID] = true
	}
	var added []string
	for item := range firstStart {
		if !inGraph[item] {
			added = append(added, item)
		}
	}
	slices.SortFunc(added, func(a, b string) int { return cmp.Or(firstStart[a].Compare(firstStart[b].Time), cmp.Compare(a, b)) })
	for _, item := range added {
		name, kind := addedStage(spec, item)
		sr := StageReport{WorkItemID: item, Name: name, Worker: owner[item], Handler: HandlerLanguage(kind, r.python)}
		if w, ok := svc.WorkItem(spec.GroupID, item); ok {
			sr.State = string(w.State)
			if kind == "" && len(w.Contract.RequiredCapabilities) > 0 {
				kind = kindOfCapability(w.Contract.RequiredCapabilities[0].ID)
				sr.Handler = HandlerLanguage(kind, r.python)
			}
		}
		t := firstStart[item]
		sr.StartedAt = &t
		if t, ok := verified[item]; ok {
			sr.FinishedAt = &t
		}
		mr.Stages = append(mr.Stages, sr)
	}
	return mr, nil
}

// addedStage names a WorkItem added to spec's Mission while it ran: the
// hotfix, or a rework stage ("implementation r1", its stage's name and
// round); kind is "" when the item is neither.
func addedStage(spec MissionSpec, item string) (string, StageKind) {
	if item == hotfixID {
		return "hotfix", StageRequirements
	}
	if i := strings.LastIndex(item, "-r"); i > 0 {
		if s, ok := spec.Stage(item[:i]); ok {
			return s.Name + " " + item[i+1:], s.Kind
		}
	}
	return item, ""
}

// kindOfCapability is the stage kind whose handler serves capability id.
func kindOfCapability(id string) StageKind {
	for _, k := range []StageKind{StageRequirements, StageImplementation, StageTesting, StageReview, StageIntegration, StageLoad, StageSoak} {
		if templateFor(k, Feature{}).capability == id {
			return k
		}
	}
	return ""
}

// assignSlots places each worker's runs on its slots, from the
// authority's leases: first free slot in start order. A lease outlives the
// worker's slot by the round trip of the command that ends it (the slot is
// free as soon as the handler returns), so a run may start a few
// milliseconds before the lease it replaces ends; such a run takes the
// slot that frees first and the earlier run is cut at its start, never
// inventing more slots than the worker has.
//
// Every slot of every worker gets a row, also one that never ran anything.
func assignSlots(runs map[string][]*Interval, workers []string, slotsPer int) []SlotUsage {
	var out []SlotUsage
	ids := slices.Clone(workers)
	for id := range runs {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		list := runs[id]
		sort.SliceStable(list, func(i, j int) bool { return list[i].From.Before(list[j].From.Time) })
		var slots []*SlotUsage
		for _, iv := range list {
			var free, earliest *SlotUsage
			for _, s := range slots {
				last := s.Intervals[len(s.Intervals)-1]
				if free == nil && !last.To.After(iv.From.Time) {
					free = s
				}
				if earliest == nil || last.To.Before(earliest.Intervals[len(earliest.Intervals)-1].To.Time) {
					earliest = s
				}
			}
			switch {
			case free != nil:
				free.Intervals = append(free.Intervals, *iv)
			case len(slots) < slotsPer || earliest == nil:
				slots = append(slots, &SlotUsage{Worker: id, Slot: len(slots), Intervals: []Interval{*iv}})
			default:
				earliest.Intervals[len(earliest.Intervals)-1].To = iv.From
				earliest.Intervals = append(earliest.Intervals, *iv)
			}
		}
		for len(slots) < slotsPer {
			slots = append(slots, &SlotUsage{Worker: id, Slot: len(slots)})
		}
		for _, s := range slots {
			out = append(out, *s)
		}
	}
	return out
}
