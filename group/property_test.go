package group

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group/grouptest"
	"github.com/missionweave/mwp-worker/protocol"
	"pgregory.net/rapid"
)

// fromEach maps each source to to; an empty to means "stays where it is".

// atLeastChecks raises rapid's number of generated sequences for this test
// (at least n, unless -short or a larger -rapid.checks was given).
func atLeastChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil || testing.Short() {
		return
	}
	old := f.Value.String()
	if cur, err := strconv.Atoi(old); err == nil && cur >= n {
		return
	}
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// TestPropertyRandomCommands drives two WorkItems with random, often wrong,
// commands from three workers and a coordinator on a randomly stepped clock.
// Invariants: every accepted transition is in the table, refusals change
// nothing, at most one agent holds ownership and a lease is always the
// owner's, ownership epochs strictly increase, revisions step by one, and
// verified and cancelled are terminal.
func TestPropertyRandomCommands(t *testing.T) {
	atLeastChecks(t, 1000)
	reached := map[string]int{}
	defer func() {
		keys := make([]string, 0, len(reached))
		for k := range reached {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			t.Logf("reached %-60s %d", k, reached[k])
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		k := newKit(grouptest.RapidTB{T: t, RT: rt})
		k.authorize("a")
		k.authorize("b", protocol.Dependency{WorkItemID: "a", Policy: protocol.DependencySubmitted})
		items := []string{"a", "b"}
		agents := []string{"w1", "w2", "w3"}
		var leases []string
		offers := 0
		lastEpoch := map[string]uint64{}
		revision := map[string]uint64{"a": 1, "b": 1}
		finished := map[string]protocol.WorkItemState{}

		pickItem := func(rt *rapid.T) string { return rapid.SampledFrom(items).Draw(rt, "item") }
		// Half the draws are the values a well-behaved sender would use, so
		// sequences get deep into the table; the rest are anything.
		pickAgent := func(rt *rapid.T, id string) string {
			w := k.g.Items[id]
			if rapid.Bool().Draw(rt, "plausibleAgent") {
				if w.Ownership != nil {
					return w.Ownership.OwnerAgentID
				}
				if w.Offer != nil {
					return rapid.SampledFrom([]string(w.Offer.Candidates)).Draw(rt, "candidate")
				}
			}
			return rapid.SampledFrom(agents).Draw(rt, "agent")
		}
		pickEpoch := func(rt *rapid.T, id string) uint64 {
			last := k.g.Items[id].LastOwnershipEpoch
			if rapid.Bool().Draw(rt, "latestEpoch") {
				return last
			}
			return rapid.Uint64Range(0, last+1).Draw(rt, "epoch")
		}
		pickLease := func(rt *rapid.T, id string) string {
			if l := k.g.Items[id].Lease; l != nil && rapid.Bool().Draw(rt, "currentLease") {
				return l.LeaseID
			}
			if len(leases) == 0 {
				return "lease-none"
			}
			return rapid.SampledFrom(leases).Draw(rt, "oldLease")
		}

		// step applies one input and checks every invariant against it.
		step := func(rt *rapid.T, kind string, do func() (Outcome, error)) {
			before := snapshot(k.t, k.g)
			prev := map[string]protocol.WorkItemState{}
			for id, w := range k.g.Items {
				prev[id] = w.State
			}
			out, err := do()
			if err != nil {
				if _, ok := err.(*protocol.Error); !ok {
					rt.Fatalf("%s: error %T is not a *protocol.Error", kind, err)
				}
				if len(out.Events) != 0 || snapshot(k.t, k.g) != before {
					rt.Fatalf("%s refused with %v but changed state or emitted events", kind, err)
				}
				return
			}
			for _, e := range out.Events {
				id := e.Aggregate.ID
				if e.Aggregate.Kind != protocol.AggregateWorkItem {
					continue
				}
				if e.Revision != revision[id]+1 {
					rt.Fatalf("%s: %s revision %d after %d", kind, id, e.Revision, revision[id])
				}
				revision[id] = e.Revision
				if e.Type == protocol.EvtWorkOfferAccepted {
					ev := e.Payload.(*OfferAccepted)
					if !ev.RenewedAcceptance {
						if ev.Ownership.OwnershipEpoch <= lastEpoch[id] {
							rt.Fatalf("ownership epoch of %s went %d → %d", id, lastEpoch[id], ev.Ownership.OwnershipEpoch)
						}
						lastEpoch[id] = ev.Ownership.OwnershipEpoch
					}
				}
			}
			for id, w := range k.g.Items {
				from, to := prev[id], w.State
				touched := false
				for _, e := range out.Events {
					touched = touched || e.Aggregate.ID == id
				}
				if !touched {
					if from != to {
						rt.Fatalf("%s: %s moved %s → %s without an event", kind, id, from, to)
					}
					continue
				}
				reached[fmt.Sprintf("%s %s→%s", kind, from, to)]++
				if !slices.Contains(grouptest.Transitions[kind][from], to) {
					rt.Fatalf("%s: %s moved %s → %s, not in the table", kind, id, from, to)
				}
			}
		}

		start := func(rt *rapid.T) {
			id := pickItem(rt)
			in := k.startIn(pickAgent(rt, id), id, pickEpoch(rt, id))
			if o := k.g.Items[id].Ownership; o != nil && rapid.Bool().Draw(rt, "wellFormed") {
				in = k.startIn(o.OwnerAgentID, id, o.OwnershipEpoch)
			}
			step(rt, string(protocol.CmdWorkStart), func() (Outcome, error) { return k.apply(in) })
			if l := k.g.Items[id].Lease; l != nil && !slices.Contains(leases, l.LeaseID) {
				leases = append(leases, l.LeaseID)
			}
		}
		leased := func(rt *rapid.T) {
			id := pickItem(rt)
			a, e, l := pickAgent(rt, id), pickEpoch(rt, id), pickLease(rt, id)
			if w := k.g.Items[id]; w.Lease != nil && rapid.Bool().Draw(rt, "wellFormed") {
				a, e, l = w.Lease.AgentID, w.Lease.OwnershipEpoch, w.Lease.LeaseID
			}
			mk := rapid.SampledFrom([]string{"checkpoint", "block", "submit", "renew", "fail"}).Draw(rt, "cmd")
			var in Input
			switch mk {
			case "checkpoint":
				in = k.checkpointIn(a, id, e, l)
			case "block":
				in = k.blockIn(a, id, e, l)
			case "submit":
				in = k.submitIn(a, id, e, l)
			case "renew":
				in = k.renewIn(a, id, e, l)
			case "fail":
				in = k.worker(a, protocol.CmdWorkFail, &protocol.FailWorkPayload{WorkItemID: id, Reason: "x", Evidence: failureEv, OwnershipEpoch: protocol.Uint64(e), LeaseID: l})
			}
			step(rt, string(in.Type), func() (Outcome, error) { return k.apply(in) })
		}

		rt.Repeat(map[string]func(*rapid.T){
			"restartReplica": func(rt *rapid.T) { k.restartReplica() },
			"advance": func(rt *rapid.T) {
				k.advance(rapid.SampledFrom([]time.Duration{0, time.Second, 10 * time.Second, 30 * time.Second, 30 * time.Second, 90 * time.Second, 3 * time.Minute, 11 * time.Minute, 31 * time.Minute}).Draw(rt, "d"))
			},
			"offer": func(rt *rapid.T) {
				id := pickItem(rt)
				offers++
				cands := rapid.SliceOfNDistinct(rapid.SampledFrom(agents), 1, 3, rapid.ID[string]).Draw(rt, "candidates")
				p := k.offerPayload(id, fmt.Sprintf("of-%d", offers), cands...)
				step(rt, string(protocol.CmdWorkOffer), func() (Outcome, error) { return k.apply(k.coordIn(protocol.CmdWorkOffer, p)) })
			},
			"accept": func(rt *rapid.T) {
				id := pickItem(rt)
				offer := fmt.Sprintf("of-%d", rapid.IntRange(0, offers).Draw(rt, "offer"))
				if o := k.g.Items[id].Offer; o != nil && rapid.Bool().Draw(rt, "currentOffer") {
					offer = o.OfferID
				}
				in := k.acceptIn(pickAgent(rt, id), id, offer)
				step(rt, string(protocol.CmdWorkAcceptOffer), func() (Outcome, error) { return k.apply(in) })
			},
			"grant": func(rt *rapid.T) {
				id := pickItem(rt)
				in := k.human(protocol.CmdApprovalGrantExecution, &protocol.GrantExecutionPayload{ApprovalID: "apr", WorkItemID: id, ContractRevision: k.g.Items[id].Contract.Revision})
				step(rt, string(protocol.CmdApprovalGrantExecution), func() (Outcome, error) { return k.apply(in) })
			},
			"start":        start,
			"start again":  start,
			"leased":       leased,
			"leased again": leased,
			"coordinator": func(rt *rapid.T) {
				id := pickItem(rt)
				var in Input
				switch rapid.SampledFrom([]string{"unblock", "unblock", "accept_result", "accept_result", "accept_result", "fail", "cancel", "child", "dependency"}).Draw(rt, "cmd") {
				case "unblock":
					in = k.unblockIn(id)
				case "accept_result":
					in = k.acceptResultIn(id)
				case "fail":
					in = k.failIn(id)
				case "cancel":
					in = k.cancelIn(id)
				case "child":
					in = k.createChildIn(id, "mis-child-"+id, rapid.SampledFrom([]protocol.ChildFailurePolicy{"block", "fail"}).Draw(rt, "policy"))
				case "dependency":
					in = k.coordIn(protocol.CmdDependencyInsert, &protocol.InsertDependencyPayload{WorkItemID: "b", ContractRevision: k.g.Items["b"].Contract.Revision + 1,
						Dependencies: protocol.List[protocol.Dependency]{{WorkItemID: "a", Policy: protocol.DependencyVerified}}})
				}
				step(rt, string(in.Type), func() (Outcome, error) { return k.apply(in) })
			},
			"childOutcome": func(rt *rapid.T) {
				id := pickItem(rt)
				o := ChildOutcome{ParentWorkItemID: id, ChildMissionID: "mis-child-" + id, CausationID: "evt",
					State: rapid.SampledFrom([]protocol.MissionState{"approved", "cancelled", "terminated", "active"}).Draw(rt, "childState")}
				step(rt, "child_outcome", func() (Outcome, error) { return k.childOutcome(o) })
			},
			"": func(rt *rapid.T) {
				for _, id := range items {
					w := k.g.Items[id]
					if s, ok := finished[id]; ok && w.State != s {
						rt.Fatalf("%s left terminal state %s for %s", id, s, w.State)
					}
					if w.State.Terminal() {
						finished[id] = w.State
					}
					if w.Lease != nil {
						o := w.Ownership
						if w.State != protocol.WorkActive || o == nil || o.OwnerAgentID != w.Lease.AgentID || o.OwnershipEpoch != w.Lease.OwnershipEpoch {
							rt.Fatalf("%s: lease %+v outside active ownership %+v (%s)", id, w.Lease, o, w.State)
						}
					}
					if w.State == protocol.WorkActive && w.Lease == nil {
						rt.Fatalf("%s active without a lease", id)
					}
					if w.State == protocol.WorkQueued && w.Ownership == nil {
						rt.Fatalf("%s queued without an owner", id)
					}
					if w.Ownership != nil && w.Ownership.OwnershipEpoch != w.LastOwnershipEpoch {
						rt.Fatalf("%s: owner epoch %d is not the latest %d", id, w.Ownership.OwnershipEpoch, w.LastOwnershipEpoch)
					}
					// Exactly the owner, and nobody else, passes the ownership
					// check for the latest epoch.
					holders := 0
					for _, a := range agents {
						if w.CheckOwnership(a, w.LastOwnershipEpoch) == nil {
							holders++
						}
					}
					if holders > 1 || (holders == 1) != (w.Ownership != nil) {
						rt.Fatalf("%s: %d agents pass the ownership check, owner %+v", id, holders, w.Ownership)
					}
				}
			},
		})
	})
}
