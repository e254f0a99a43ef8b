package poc

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// The run's invariants, checked after the run from the durable stores only
// (the authority's bbolt log, each worker's store, the integration
// repository's effect log), never from in-memory counters of the run.

// The invariant names, as the report shows them.
const (
	InvSequences     = "per-group-sequences-contiguous"
	InvStaleOwner    = "no-stale-owner-completion"
	InvEffectsOnce   = "one-external-effect-per-idempotency-key"
	InvAppliedOnce   = "no-event-applied-twice"
	InvBothApproved  = "missions-approved"
	maxDetailProblem = 3
)

// EventLog is the authority's durable log as the checks read it;
// *authoritylite.Service (opened on DIR/authority after the run) is one.
type EventLog interface {
	Events(groupID string, after uint64, max int) ([]wss.StoredEvent, error)
	PublicKey() protocol.VerifyingKey
	LateResults() ([]group.LateResult, error)
}

// RunStores names the durable stores of a run.
type RunStores struct {
	Log      EventLog
	Missions []MissionSpec
	// Workers maps each worker agent to its data dir (DIR/worker.db).
	Workers map[string]string
	Effects string // the integration repository's effect log file
	// Journal is the fault journal (JournalFile); fault checks only.
	Journal string
	// Observations are the workers' own counters and logs
	// (ObservationsFile); fault checks only.
	Observations string
}

func (st RunStores) workerDirs() []string {
	ids := make([]string, 0, len(st.Workers))
	for id := range st.Workers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	dirs := make([]string, len(ids))
	for i, id := range ids {
		dirs[i] = st.Workers[id]
	}
	return dirs
}

// CheckInvariants runs every check.
func CheckInvariants(st RunStores) []InvariantResult {
	groups := make([]string, len(st.Missions))
	for i, m := range st.Missions {
		groups[i] = m.GroupID
	}
	return []InvariantResult{
		CheckSequences(st.Log, groups),
		CheckNoStaleCompletion(st.Log, groups),
		CheckEffectsOnce(st.Effects),
		CheckWorkerStores(st.workerDirs()),
		CheckMissionsApproved(st.Log, st.Missions),
	}
}

func result(name string, problems []string, ok string) InvariantResult {
	if len(problems) == 0 {
		return InvariantResult{Name: name, Held: true, Detail: ok}
	}
	d := strings.Join(problems[:min(len(problems), maxDetailProblem)], "; ")
	if len(problems) > maxDetailProblem {
		d += fmt.Sprintf(" (+%d more)", len(problems)-maxDetailProblem)
	}
	return InvariantResult{Name: name, Held: false, Detail: d}
}

// readLog returns a Group's events decoded, after checking each one's
// authority signature; problems lists what did not verify.
func readLog(log EventLog, group string) ([]protocol.Event, []string, error) {
	stored, err := log.Events(group, 0, 0)
	if err != nil {
		return nil, nil, err
	}
	keys := protocol.NewKeySet(log.PublicKey())
	var problems []string
	out := make([]protocol.Event, 0, len(stored))
	for _, se := range stored {
		doc, err := protocol.Parse(se.Raw, protocol.DecodeOptions{})
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s/%d: %v", group, se.Sequence, err))
			continue
		}
		if err := protocol.Verify(doc.(map[string]any), keys); err != nil {
			problems = append(problems, fmt.Sprintf("%s/%d: signature: %v", group, se.Sequence, err))
		}
		var ev protocol.Event
		if err := json.Unmarshal(se.Raw, &ev); err != nil {
			problems = append(problems, fmt.Sprintf("%s/%d: %v", group, se.Sequence, err))
			continue
		}
		out = append(out, ev)
	}
	return out, problems, nil
}

// CheckSequences: every Group's log runs 1, 2, 3 … without a gap or a
// repeat, every event is signed by the authority, belongs to its Group and
// has a unique event id.
func CheckSequences(log EventLog, groups []string) InvariantResult {
	var problems []string
	total := 0
	for _, g := range groups {
		evs, bad, err := readLog(log, g)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", g, err))
			continue
		}
		problems = append(problems, bad...)
		ids := map[string]bool{}
		for i, ev := range evs {
			if ev.Seq() != uint64(i+1) {
				problems = append(problems, fmt.Sprintf("%s: event %d has sequence %d", g, i+1, ev.Seq()))
				break
			}
			if ev.GroupID != g {
				problems = append(problems, fmt.Sprintf("%s/%d: groupId %s", g, ev.Seq(), ev.GroupID))
			}
			if ids[ev.EventID] {
				problems = append(problems, fmt.Sprintf("%s/%d: event id %s repeats", g, ev.Seq(), ev.EventID))
			}
			ids[ev.EventID] = true
		}
		total += len(evs)
	}
	return result(InvSequences, problems, fmt.Sprintf("%d Groups, %d events, contiguous from 1, every signature valid", len(groups), total))
}

// grant is a WorkItem's current ownership and lease as the log shows it.
type grant struct {
	owner string
	epoch uint64
	lease string
}

// CheckNoStaleCompletion: every work.result.accepted follows a
// work.submitted sent by the owner of the ownership epoch and execution
// lease current at that point of the log; submissions of fenced owners
// exist only as late results in the audit store.
func CheckNoStaleCompletion(log EventLog, groups []string) InvariantResult {
	var problems []string
	accepted := 0
	for _, g := range groups {
		evs, _, err := readLog(log, g)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", g, err))
			continue
		}
		cur := map[string]*grant{}
		pending := map[string]bool{} // items whose last submission was current
		for _, ev := range evs {
			if ev.Aggregate == nil || ev.Aggregate.Kind != protocol.AggregateWorkItem {
				continue
			}
			id := ev.Aggregate.ID
			payload, err := group.Decode(ev.Type, ev.Payload)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s/%d: %v", g, ev.Seq(), err))
				continue
			}
			gr := cur[id]
			switch p := payload.(type) {
			case *group.OfferAccepted:
				if p.Ownership != nil && !p.RenewedAcceptance {
					if gr != nil && p.Ownership.OwnershipEpoch <= gr.epoch {
						problems = append(problems, fmt.Sprintf("%s: ownership epoch %d after %d", id, p.Ownership.OwnershipEpoch, gr.epoch))
					}
					cur[id] = &grant{owner: p.Ownership.OwnerAgentID, epoch: p.Ownership.OwnershipEpoch}
				}
				pending[id] = false
			case *group.Started, *group.Progressed:
				if l := group.LeaseOf(p); gr != nil && l != nil {
					gr.lease = l.LeaseID
				}
			case *group.Submitted:
				ok := gr != nil && ev.Actor.ID == gr.owner && p.Ownership != nil && p.Ownership.OwnershipEpoch == gr.epoch && p.LeaseID == gr.lease
				if !ok {
					problems = append(problems, fmt.Sprintf("%s/%d: %s submitted %s without the current grant", g, ev.Seq(), ev.Actor.ID, id))
				}
				pending[id] = ok
			case *group.ResultAccepted:
				if p.ChildMissionID != "" {
					continue
				}
				if !pending[id] {
					problems = append(problems, fmt.Sprintf("%s/%d: %s accepted without a current submission", g, ev.Seq(), id))
				}
				pending[id] = false
				accepted++
			case *group.OfferCreated, *group.Failed, *group.Cancelled:
				// An offer is only made without an active owner; failure and
				// cancellation release every grant.
				delete(cur, id)
				pending[id] = false
			}
		}
	}
	late, err := log.LateResults()
	if err != nil {
		problems = append(problems, "late results: "+err.Error())
	}
	for _, l := range late {
		if l.Code != protocol.CodeWorkStaleOwnership && l.Code != protocol.CodeWorkLeaseExpired {
			problems = append(problems, fmt.Sprintf("late result of %s kept with code %s", l.WorkItemID, l.Code))
		}
	}
	return result(InvStaleOwner, problems, fmt.Sprintf("%d results accepted, each from the current owner, epoch and lease; %d late results kept for audit only", accepted, len(late)))
}

// CheckEffectsOnce: the integration repository recorded at most one effect
// per idempotency key and no change under two keys, its key index agrees,
// and every repeated request was answered with the first effect.
func CheckEffectsOnce(path string) InvariantResult {
	if path == "" {
		return result(InvEffectsOnce, nil, "no external effects in this run")
	}
	recs, err := ReadEffects(path)
	if err != nil {
		return result(InvEffectsOnce, []string{err.Error()}, "")
	}
	var problems []string
	bySeq := map[uint64]Effect{}
	seen := map[string]uint64{}    // key → its first effect
	patches := map[string]string{} // patch digest → the key it was applied under
	for _, e := range recs.Effects {
		bySeq[e.Seq] = e
		// The same change under a second key is an effect the keys did not
		// stop: a retry that minted a new key.
		if k, dup := patches[e.PatchDigest]; dup && k != e.Key {
			problems = append(problems, fmt.Sprintf("patch %s applied under two keys, %s and %s (effect %d)", shortDigest(e.PatchDigest), k, e.Key, e.Seq))
		}
		patches[e.PatchDigest] = e.Key
		if first, dup := seen[e.Key]; dup {
			problems = append(problems, fmt.Sprintf("key %s has effects %d and %d", e.Key, first, e.Seq))
			continue
		}
		seen[e.Key] = e.Seq
		if recs.Keys[e.Key] != e.Seq {
			problems = append(problems, fmt.Sprintf("key %s: index says %d, effect is %d", e.Key, recs.Keys[e.Key], e.Seq))
		}
	}
	repeats := 0
	for _, q := range recs.Requests {
		e, ok := bySeq[q.EffectSeq]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("request %d names missing effect %d", q.Seq, q.EffectSeq))
		case q.Repeat:
			repeats++
		case e.Key != q.Key:
			problems = append(problems, fmt.Sprintf("request %d applied effect %d under key %s, recorded as %s", q.Seq, e.Seq, q.Key, e.Key))
		}
	}
	return result(InvEffectsOnce, problems, fmt.Sprintf("%d effects under %d keys; %d repeated requests answered with the first result", len(recs.Effects), len(seen), repeats))
}

// CheckMissionsApproved: the last Mission event of every Group says
// approved.
func CheckMissionsApproved(log EventLog, missions []MissionSpec) InvariantResult {
	var problems, ok []string
	for _, m := range missions {
		evs, _, err := readLog(log, m.GroupID)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", m.MissionID, err))
			continue
		}
		state := protocol.MissionState("")
		for _, ev := range evs {
			if ev.Aggregate != nil && ev.Aggregate.Kind == protocol.AggregateMission {
				payload, err := group.Decode(ev.Type, ev.Payload)
				if mp, ok := payload.(group.MissionPayload); err == nil && ok {
					state = mp.Ref().State
				}
			}
		}
		if state != protocol.MissionApproved {
			problems = append(problems, fmt.Sprintf("%s is %q", m.MissionID, state))
		} else {
			ok = append(ok, m.MissionID)
		}
	}
	sort.Strings(ok)
	return result(InvBothApproved, problems, strings.Join(ok, ", ")+" approved by the MissionOwner")
}
