package authoritylite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/group/grouptest"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"pgregory.net/rapid"
)

// TestServiceProperties drives the whole Service (pipeline, log, group
// commit, reopen) with random commands from random actors and checks, from
// the durable log only: sequences contiguous from 1 and signed; each
// aggregate's revision moves by exactly one per event; every WorkItem
// event is a row of the 10.2 table for the command that caused it; at most
// one owner at a time; a refused command appends nothing. The state is
// checkpointed every 1 to 8 events or at the default interval, and the
// authority is closed and reopened, or crashed and reopened on what the
// crash left, at random points.
func TestServiceProperties(t *testing.T) {
	serviceProperties(t, nil)
}

// serviceProperties is TestServiceProperties on the log tree opens (nil:
// authority.db); tree is called with each run's name, a new log each.
func serviceProperties(t *testing.T, tree func(run string) func(testing.TB) logstore.Tree) {
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		var open func(testing.TB) logstore.Tree
		if tree != nil {
			open = tree(fmt.Sprintf("run%d", runs))
		}
		k := newSvcOn(grouptest.RapidTB{T: t, RT: rt}, rapid.SampledFrom([]uint64{0, 1, 2, 3, 5, 8}).Draw(rt, "checkpointEvery"), open)
		sent := map[string]protocol.CommandType{} // actionId -> type
		items := []string{"wi-0", "wi-1", "wi-2"}
		compacted := false
		ctx := context.Background()
		do := func(p *Principal, typ protocol.CommandType, payload any) {
			_, raw, err := p.Build(typ, "grp-a", payload)
			if err != nil {
				rt.Fatal(err)
			}
			var cmd protocol.Command
			_ = json.Unmarshal(raw, &cmd)
			before := k.s.LastSequence("grp-a")
			if _, err := k.s.Submit(ctx, "", raw); err != nil {
				if protocol.CodeOf(err) == protocol.CodeInternalError {
					rt.Fatalf("%s: %v", typ, err)
				}
				if k.s.LastSequence("grp-a") != before {
					rt.Fatalf("refused %s appended events", typ)
				}
				return
			}
			sent[cmd.ActionID] = typ
		}
		workers := []string{"w1", "w2"}
		next := map[protocol.WorkItemState]int{protocol.WorkOpen: 1, protocol.WorkOffered: 2, protocol.WorkQueued: 3, protocol.WorkActive: 6, protocol.WorkSubmitted: 7, protocol.WorkFailed: 1, protocol.WorkVerified: 9, protocol.WorkBlocked: 8, protocol.WorkCancelled: 9}
		steps := rapid.IntRange(5, 40).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			id := rapid.SampledFrom(items).Draw(rt, "item")
			wk := rapid.SampledFrom(workers).Draw(rt, "worker")
			w, exists := k.s.WorkItem("grp-a", id)
			// Mostly act as the owner, so the happy path is explored too.
			if exists && w.Ownership != nil && rapid.IntRange(0, 4).Draw(rt, "asOwner") > 0 {
				wk = w.Ownership.OwnerAgentID
			}
			op := rapid.IntRange(0, 13).Draw(rt, "op")
			if exists && rapid.Bool().Draw(rt, "follow") {
				op = next[w.State] // the command that moves this state forward
				if w.State == protocol.WorkActive {
					op = rapid.SampledFrom([]int{4, 5, 6}).Draw(rt, "activeOp")
				}
			}
			switch op {
			case 0:
				c := testContract(id)
				c.Deadline = protocol.NewTime(k.clk.Now().Add(24 * time.Hour))
				c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
				do(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: c})
			case 1:
				if exists {
					do(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: fmt.Sprintf("off-%d", i), Contract: w.Contract,
						Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: basis(k.clk.Now())}, {AgentID: "w2", SelectionBasis: basis(k.clk.Now())}},
						ExpiresAt:  protocol.NewTime(k.clk.Now().Add(time.Minute))})
				}
			case 2:
				if exists && w.Offer != nil {
					do(k.w[wk], protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: id, OfferID: w.Offer.OfferID, ContractRevision: w.Contract.Revision, ScheduleDisclosure: disclosure(k.clk.Now())})
				}
			case 3:
				if exists && w.Ownership != nil {
					do(k.w[wk], protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: id, OwnershipEpoch: w.Ownership.OwnershipEpoch})
				}
			case 4:
				if exists && w.Lease != nil {
					do(k.w[wk], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: id, OwnershipEpoch: w.Lease.OwnershipEpoch, LeaseID: w.Lease.LeaseID, Progress: progress(k.clk.Now())})
				}
			case 5:
				if exists && w.Lease != nil {
					do(k.w[wk], protocol.CmdWorkCheckpoint, &protocol.CheckpointWorkPayload{WorkItemID: id, OwnershipEpoch: w.Lease.OwnershipEpoch, LeaseID: w.Lease.LeaseID,
						CheckpointID: fmt.Sprintf("cp-%d", i), StateDigest: protocol.Digest([]byte{byte(i)}), Progress: progress(k.clk.Now()), Reason: protocol.CheckpointPreempted})
				}
			case 6:
				if exists && w.Lease != nil {
					do(k.w[wk], protocol.CmdWorkSubmit, &protocol.SubmitWorkPayload{WorkItemID: id, OwnershipEpoch: w.Lease.OwnershipEpoch, LeaseID: w.Lease.LeaseID,
						Artifacts: protocol.List[string]{protocol.Digest([]byte("x"))}, Evidence: protocol.List[protocol.Evidence]{evidence(id, "ac-1", "ac-2")}})
				}
			case 7:
				if exists {
					do(k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: w.Contract.Revision})
				}
			case 8:
				if exists {
					do(k.coord, protocol.CmdWorkFail, &protocol.FailWorkPayload{WorkItemID: id, Reason: "broken", Evidence: failureEv})
				}
			case 9:
				k.clk.Advance(time.Duration(rapid.IntRange(0, 180).Draw(rt, "seconds")) * time.Second)
			case 10:
				k.s.Close()
				k.reopened(k.open(grouptest.RapidTB{T: t, RT: rt}))
			case 12:
				k.crash()
			case 11:
				if err := k.w[wk].OpenSession(ctx); err != nil {
					rt.Fatalf("session_open: %v", err)
				}
			case 13:
				// Snapshot and drop all but the last few events: a worker
				// starting now restores the snapshot (CURSOR_TOO_OLD).
				if !rapid.Bool().Draw(rt, "compact") {
					break
				}
				if _, err := k.s.Compact("grp-a", uint64(rapid.IntRange(0, 4).Draw(rt, "retain"))); err != nil {
					rt.Fatalf("compact: %v", err)
				}
				compacted = true
			}
		}
		if !compacted { // the log from sequence 1 is still online
			checkProperties(rt, k.s, sent)
			checkReplay(rt, k.s, "grp-a")
		}
		checkWorkerView(t, rt, k.s, "grp-a")
		checkTailEqualsStore(rt, k.s, "grp-a")
		checkIndexes(rt, k.s, "grp-a")
	})
}

// checkReplay folds the durable log the way a worker does, with a restart
// (the replica written out and read back) partway, and requires exactly
// the authority's Mission and WorkItem records.
func checkReplay(rt *rapid.T, s *Service, groupID string) {
	evs, err := s.Events(groupID, 0, 0)
	if err != nil {
		rt.Fatal(err)
	}
	replica := group.NewGroup(groupID, group.Limits{})
	restartAt := rapid.IntRange(0, len(evs)).Draw(rt, "restartAt")
	for i, se := range evs {
		if i == restartAt {
			raw, err := json.Marshal(replica)
			if err != nil {
				rt.Fatal(err)
			}
			replica = group.NewGroup(groupID, group.Limits{})
			if err := json.Unmarshal(raw, replica); err != nil {
				rt.Fatal(err)
			}
		}
		var ev protocol.Event
		if err := json.Unmarshal(se.Raw, &ev); err != nil {
			rt.Fatal(err)
		}
		in, err := group.FromWire(&ev)
		if err != nil {
			rt.Fatalf("event %d %s: %v", se.Sequence, ev.Type, err)
		}
		if err := replica.Fold(in); err != nil {
			rt.Fatalf("fold event %d %s: %v", se.Sequence, ev.Type, err)
		}
	}
	m, ok := s.Mission(groupID)
	if ok != (replica.Mission != nil) || ok && !jsonEqual(m, *replica.Mission) {
		rt.Fatalf("replayed Mission %+v, authority %+v", replica.Mission, m)
	}
	ids := s.WorkItemIDs(groupID)
	if len(ids) != len(replica.Items) {
		rt.Fatalf("replayed %d WorkItems, authority %d", len(replica.Items), len(ids))
	}
	for _, id := range ids {
		w, _ := s.WorkItem(groupID, id)
		if r := replica.Items[id]; r == nil || !jsonEqual(w, *r) {
			a, _ := json.Marshal(w)
			b, _ := json.Marshal(r)
			rt.Fatalf("WorkItem %s replayed\n%s\nauthority\n%s", id, b, a)
		}
	}
}

// checkWorkerView follows the Group as a worker's store does (queue:
// signed events, a snapshot restore when the log was compacted, then a
// restart that rebuilds the view by replay) and requires the authority's
// WorkItem records in every member the wire shows.
func checkWorkerView(t *testing.T, rt *rapid.T, s *Service, groupID string) {
	st, err := queue.Open(t.TempDir(), queue.Options{NoSync: true, NoSocket: true})
	if err != nil {
		rt.Fatal(err)
	}
	defer st.Close()
	evs, err := s.Events(groupID, 0, 0)
	if protocol.CodeOf(err) == protocol.CodeCursorTooOld {
		var pe *protocol.Error
		errors.As(err, &pe)
		ref, ok := pe.Details["snapshot"].(*protocol.SnapshotRef)
		if !ok {
			rt.Fatalf("CURSOR_TOO_OLD without a snapshot: %v", err)
		}
		doc, serr := s.Snapshot(*ref)
		if serr != nil {
			rt.Fatal(serr)
		}
		keys := protocol.NewKeySet(s.PublicKey())
		if _, err := st.RestoreSnapshot(*ref, doc, func(d map[string]any) error { return protocol.Verify(d, keys) }); err != nil {
			rt.Fatalf("restore: %v", err)
		}
		evs, err = s.Events(groupID, ref.Sequence, 0)
	}
	if err != nil {
		rt.Fatal(err)
	}
	var in []queue.Incoming
	for _, se := range evs {
		x, err := queue.Decode(se.Raw)
		if err != nil {
			rt.Fatalf("event %d: %v", se.Sequence, err)
		}
		in = append(in, x)
	}
	res, err := st.Apply(in)
	if err != nil || len(res.Problems) > 0 || len(res.Rejected) > 0 {
		rt.Fatalf("apply: %v, problems %v, rejected %v", err, res.Problems, res.Rejected)
	}
	compareView(rt, s, st, groupID, "live")
	if err := st.Rebuild(); err != nil {
		rt.Fatal(err)
	}
	compareView(rt, s, st, groupID, "rebuilt")
}

func compareView(rt *rapid.T, s *Service, st *queue.Store, groupID, when string) {
	for _, id := range s.WorkItemIDs(groupID) {
		w, _ := s.WorkItem(groupID, id)
		e, ok := st.Item(groupID, id)
		if !ok {
			rt.Fatalf("%s view lacks %s", when, id)
		}
		got, want := e.Item.WorkItem, w.WorkItem
		got.Contract, want.Contract = protocol.WorkContract{}, protocol.WorkContract{}
		// The scheduling view derived from the record says the same.
		derived := protocol.WorkItem{WorkItemID: e.WorkItemID, MissionID: e.MissionID, GroupID: w.GroupID, State: e.State, Revision: e.Revision,
			Checkpoint: e.Checkpoint, Blocker: e.Blocker, ChildMissionID: e.ChildMissionID, Attempts: e.Attempts}
		wantDerived := protocol.WorkItem{WorkItemID: w.WorkItemID, MissionID: w.MissionID, GroupID: w.GroupID, State: w.State, Revision: w.Revision,
			Checkpoint: w.Checkpoint, Blocker: w.Blocker, ChildMissionID: w.ChildMissionID, Attempts: w.Attempts}
		owner, epoch := "", uint64(0)
		if o := w.Ownership; o != nil {
			owner, epoch = o.OwnerAgentID, o.OwnershipEpoch
		}
		lease := ""
		if l := w.Lease; l != nil {
			lease = l.LeaseID
		}
		gotLease := ""
		if e.Lease != nil {
			gotLease = e.Lease.LeaseID
		}
		offerOK := (w.Offer == nil) == (e.Offer == nil) && (w.Offer == nil || w.Offer.OfferID == e.Offer.OfferID && w.Offer.ExpiresAt.Equal(e.Offer.ExpiresAt.Time))
		if !jsonEqual(derived, wantDerived) || e.Owner != owner || e.OwnershipEpoch != epoch || gotLease != lease || !offerOK {
			rt.Fatalf("%s view of %s: entry %+v, authority %+v", when, id, e, w.WorkItem)
		}
		if !jsonEqual(got, want) || e.State != w.State || e.Revision != w.Revision {
			a, _ := json.Marshal(want)
			b, _ := json.Marshal(got)
			rt.Fatalf("%s view of %s\n%s\nauthority\n%s", when, id, b, a)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func checkProperties(rt *rapid.T, s *Service, sent map[string]protocol.CommandType) {
	evs, err := s.Events("grp-a", 0, 0)
	if err != nil {
		rt.Fatal(err)
	}
	keys := protocol.NewKeySet(s.PublicKey())
	rev := map[protocol.Aggregate]uint64{}
	state := map[string]protocol.WorkItemState{}
	owner := map[string]string{}
	for i, se := range evs {
		if se.Sequence != uint64(i+1) {
			rt.Fatalf("sequence %d at position %d", se.Sequence, i)
		}
		doc, _ := protocol.Parse(se.Raw, protocol.DecodeOptions{})
		if err := protocol.Verify(doc.(map[string]any), keys); err != nil {
			rt.Fatalf("event %d: %v", se.Sequence, err)
		}
		var ev protocol.Event
		_ = json.Unmarshal(se.Raw, &ev)
		agg := *ev.Aggregate
		if ev.Rev() != rev[agg]+1 {
			rt.Fatalf("event %d %s: %s/%s revision %d after %d", se.Sequence, ev.Type, agg.Kind, agg.ID, ev.Rev(), rev[agg])
		}
		rev[agg] = ev.Rev()
		if agg.Kind != protocol.AggregateWorkItem {
			continue
		}
		v, err := group.Decode(ev.Type, ev.Payload)
		if err != nil {
			rt.Fatalf("event %d %s: %v", se.Sequence, ev.Type, err)
		}
		wp, isWork := v.(group.WorkPayload)
		if !isWork { // a proposal
			continue
		}
		p := wp.Ref()
		prev, seen := state[agg.ID]
		typ, ok := sent[ev.CausationID]
		if seen && ok && prev != p.State {
			rows := grouptest.Transitions[string(typ)]
			if !slices.Contains(rows[prev], p.State) && !(typ == protocol.CmdWorkOffer && p.State == protocol.WorkOffered) {
				rt.Fatalf("event %d: %s moved %s from %s to %s, not a row of 10.2", se.Sequence, typ, agg.ID, prev, p.State)
			}
		}
		if !ok && seen && prev != p.State && !(prev == protocol.WorkActive && p.State == protocol.WorkQueued) {
			rt.Fatalf("event %d: automatic %s moved %s from %s to %s", se.Sequence, ev.Type, agg.ID, prev, p.State)
		}
		state[agg.ID] = p.State
		if o := group.OwnershipOf(v); o != nil {
			owner[agg.ID] = o.OwnerAgentID
		}
	}
	// At most one owner per item now: the authority's record agrees with the log.
	for id, o := range owner {
		w, ok := s.WorkItem("grp-a", id)
		if ok && w.Ownership != nil && w.Ownership.OwnerAgentID != o && state[id] != protocol.WorkOffered {
			rt.Fatalf("%s: record owner %s, last granted %s", id, w.Ownership.OwnerAgentID, o)
		}
	}
}
