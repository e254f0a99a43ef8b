package group

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group/grouptest"
	"github.com/missionweave/mwp-worker/protocol"
)

// t0 is an arbitrary fixed origin; tests only ever compare times relative
// to it.
var t0 = grouptest.T0

var (
	owner     = protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}
	stranger  = protocol.Actor{Kind: protocol.ActorHuman, ID: "mallory"}
	orgPolicy = protocol.Actor{Kind: protocol.ActorService, ID: "org-policy"}
)

func agent(id string) protocol.Actor { return protocol.Actor{Kind: protocol.ActorAgent, ID: id} }

// kit drives one Group through commands on a clock it steps by hand.
type kit struct {
	t       testing.TB
	g       *Group
	replica *Group // changed only by Fold
	now     time.Time
	n       int
	coord   string
	epoch   uint64 // current coordinator epoch
}

func testLimits() Limits {
	return Limits{MaxCandidates: 3, StartWithin: 10 * time.Minute, LeaseDuration: 2 * time.Minute, BlockedHold: 30 * time.Minute}
}

// newKit returns a Group with an active Mission owned by alice and
// coordinated by "coord" (epoch 1, lease 10h).
func newKit(t testing.TB) *kit {
	k := &kit{t: t, g: NewGroup("grp-a", testLimits()), now: t0}
	k.must(k.human(protocol.CmdMissionCreate, &protocol.CreateMissionPayload{
		MissionID: "mis-a", Title: "Fix bug", Objective: "ship the fix", PriorityClass: protocol.PriorityNormal,
	}))
	k.assign("coord")
	return k
}

func (k *kit) assign(agentID string) {
	k.must(k.human(protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{
		MissionID: "mis-a", AgentID: agentID, LeaseDurationMs: uint64((10 * time.Hour).Milliseconds()),
	}))
	k.coord, k.epoch = agentID, k.g.Mission.Coordinator.CoordinatorEpoch
}

func (k *kit) advance(d time.Duration) { k.now = k.now.Add(d) }

func (k *kit) input(actor protocol.Actor, typ protocol.CommandType, p any) Input {
	k.n++
	return Input{ActionID: fmt.Sprintf("act-%d", k.n), GroupID: "grp-a", Type: typ, Actor: actor, Payload: p}
}

func (k *kit) human(typ protocol.CommandType, p any) Input { return k.input(owner, typ, p) }

// coordIn is a command on the coordinator lease with the current epoch.
func (k *kit) coordIn(typ protocol.CommandType, p any) Input {
	in := k.input(agent(k.coord), typ, p)
	in.SessionEpoch, in.CoordinatorEpoch = protocol.Uint64(1), protocol.Uint64(k.epoch)
	return in
}

// worker is an agent command with session epoch 1.
func (k *kit) worker(id string, typ protocol.CommandType, p any) Input {
	in := k.input(agent(id), typ, p)
	in.SessionEpoch = protocol.Uint64(1)
	return in
}

// apply decides in and, when it is accepted, folds its events into the
// kit's replica, a Group that only ever changes by Fold as a worker's
// does: after every accepted input the two must be equal.
func (k *kit) apply(in Input) (Outcome, error) {
	out, err := k.g.Apply(in, k.now)
	if err == nil {
		k.fold(out)
	}
	return out, err
}

// childOutcome applies a linked child's outcome, folding it like apply.
func (k *kit) childOutcome(o ChildOutcome) (Outcome, error) {
	out, err := k.g.ApplyChildOutcome(o, k.now)
	if err == nil {
		k.fold(out)
	}
	return out, err
}

func (k *kit) fold(out Outcome) {
	k.t.Helper()
	if k.replica == nil {
		k.replica = NewGroup(k.g.GroupID, k.g.Limits)
	}
	for _, d := range out.Events {
		// The replica reads the event as a worker does: from its JSON.
		raw, err := json.Marshal(d.Payload)
		if err != nil {
			k.t.Fatal(err)
		}
		rev := d.Revision
		ev, err := FromWire(&protocol.Event{Type: d.Type, Aggregate: &d.Aggregate, Revision: &rev, OccurredAt: protocol.NewTime(k.now), Payload: raw})
		if err != nil {
			k.t.Fatalf("decode %s: %v", d.Type, err)
		}
		if err := k.replica.Fold(ev); err != nil {
			k.t.Fatalf("fold %s: %v", d.Type, err)
		}
	}
	if got, want := snapshot(k.t, k.replica), snapshot(k.t, k.g); got != want {
		k.t.Fatalf("folding the events of %v gives another state than deciding it:\n%s", eventTypes(out), diffJSON(got, want))
	}
}

// restartReplica writes the replica out and reads it back, as a worker's
// stored view survives a restart.
func (k *kit) restartReplica() {
	k.t.Helper()
	if k.replica == nil {
		return
	}
	raw, err := json.Marshal(k.replica)
	if err != nil {
		k.t.Fatal(err)
	}
	r := NewGroup(k.g.GroupID, k.g.Limits)
	if err := json.Unmarshal(raw, r); err != nil {
		k.t.Fatal(err)
	}
	k.replica = r
}

// diffJSON shows the first difference of two renderings with context.
func diffJSON(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-300)
	return fmt.Sprintf("folded  …%s\ndecided …%s", got[from:min(len(got), i+200)], want[from:min(len(want), i+200)])
}

func (k *kit) must(in Input) Outcome {
	k.t.Helper()
	out, err := k.apply(in)
	if err != nil {
		k.t.Fatalf("%s by %s: unexpected error %v", in.Type, in.Actor.ID, err)
	}
	if len(out.Events) == 0 {
		k.t.Fatalf("%s: accepted without events", in.Type)
	}
	return out
}

// refuse applies in, requires the error code and proves nothing changed.
func (k *kit) refuse(in Input, code protocol.Code) *protocol.Error {
	k.t.Helper()
	return k.refuseFn(string(in.Type)+" by "+in.Actor.ID, func() (Outcome, error) { return k.apply(in) }, code)
}

// refuseFn runs do, requires the error code and proves nothing changed.
func (k *kit) refuseFn(what string, do func() (Outcome, error), code protocol.Code) *protocol.Error {
	k.t.Helper()
	before := snapshot(k.t, k.g)
	out, err := do()
	if err == nil {
		k.t.Fatalf("%s: accepted, want %s", what, code)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		k.t.Fatalf("%s: error %T is not a *protocol.Error: %v", what, err, err)
	}
	if pe.Code != code {
		k.t.Fatalf("%s: got %s (%v), want %s", what, pe.Code, err, code)
	}
	if len(out.Events) != 0 {
		k.t.Fatalf("%s: error came with %d events", what, len(out.Events))
	}
	if after := snapshot(k.t, k.g); after != before {
		k.t.Fatalf("%s: refused input changed state\nbefore %s\nafter  %s", what, before, after)
	}
	return pe
}

func snapshot(t testing.TB, g *Group) string {
	t.Helper()
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (k *kit) state(id string) protocol.WorkItemState { return k.g.Items[id].State }

func (k *kit) wantState(id string, s protocol.WorkItemState) {
	k.t.Helper()
	if got := k.state(id); got != s {
		k.t.Fatalf("WorkItem %s is %s, want %s", id, got, s)
	}
}

func eventTypes(out Outcome) []protocol.EventType {
	ts := make([]protocol.EventType, len(out.Events))
	for i, e := range out.Events {
		ts[i] = e.Type
	}
	return ts
}

func wantEvents(t testing.TB, out Outcome, want ...protocol.EventType) {
	t.Helper()
	if got := eventTypes(out); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func testContract(id string, deps ...protocol.Dependency) protocol.WorkContract {
	return grouptest.Contract(id, deps...)
}

func evidence(subject string, criteria ...string) protocol.Evidence {
	return grouptest.Evidence(subject, criteria...)
}

var failureEv = []protocol.Evidence{evidence("wi", protocol.CriterionFailure)}

// authorize creates WorkItem id in state open.
func (k *kit) authorize(id string, deps ...protocol.Dependency) {
	k.authorizeContract(id, testContract(id, deps...))
}

func (k *kit) authorizeContract(id string, c protocol.WorkContract) {
	k.t.Helper()
	k.must(k.coordIn(protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: c}))
}

func (k *kit) offerPayload(id, offerID string, candidates ...string) *protocol.OfferWorkPayload {
	cs := make(protocol.List[protocol.OfferCandidate], len(candidates))
	for i, c := range candidates {
		cs[i] = protocol.OfferCandidate{AgentID: c}
	}
	return &protocol.OfferWorkPayload{
		WorkItemID: id, OfferID: offerID, Contract: k.g.Items[id].Contract, Candidates: cs,
		ExpiresAt: protocol.NewTime(k.now.Add(5 * time.Minute)),
	}
}

func (k *kit) offer(id, offerID string, candidates ...string) Outcome {
	k.t.Helper()
	return k.must(k.coordIn(protocol.CmdWorkOffer, k.offerPayload(id, offerID, candidates...)))
}

func (k *kit) acceptIn(agentID, id, offerID string) Input {
	return k.worker(agentID, protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{
		WorkItemID: id, OfferID: offerID, ContractRevision: k.g.Items[id].Contract.Revision,
		ScheduleDisclosure: protocol.ScheduleDisclosure{CapacityState: protocol.CapacityAvailable},
	})
}

func (k *kit) startIn(agentID, id string, epoch uint64) Input {
	return k.worker(agentID, protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: id, OwnershipEpoch: epoch})
}

func (k *kit) epochOf(id string) uint64 { return k.g.Items[id].Ownership.OwnershipEpoch }
func (k *kit) leaseOf(id string) string { return k.g.Items[id].Lease.LeaseID }

func (k *kit) checkpointIn(agentID, id string, epoch uint64, lease string) Input {
	return k.worker(agentID, protocol.CmdWorkCheckpoint, &protocol.CheckpointWorkPayload{
		WorkItemID: id, OwnershipEpoch: epoch, LeaseID: lease, CheckpointID: fmt.Sprintf("ck-%d", k.n),
		StateDigest: "sha256:" + fmt.Sprintf("%064d", k.n), Reason: protocol.CheckpointSafePoint,
	})
}

func (k *kit) blockIn(agentID, id string, epoch uint64, lease string) Input {
	return k.worker(agentID, protocol.CmdWorkBlock, &protocol.BlockWorkPayload{
		WorkItemID: id, OwnershipEpoch: epoch, LeaseID: lease, CheckpointID: "ck-block",
		StateDigest: "sha256:" + fmt.Sprintf("%064d", 7),
		Resolution:  protocol.Resolution{Kind: protocol.ResolutionClarification, Detail: "which API?"},
	})
}

func (k *kit) submitIn(agentID, id string, epoch uint64, lease string) Input {
	return k.worker(agentID, protocol.CmdWorkSubmit, &protocol.SubmitWorkPayload{
		WorkItemID: id, OwnershipEpoch: epoch, LeaseID: lease, Artifacts: protocol.List[string]{"sha256:" + fmt.Sprintf("%064d", 1)},
		Evidence: protocol.List[protocol.Evidence]{evidence(id, "ac-1"), evidence(id, "ac-2")},
	})
}

func (k *kit) renewIn(agentID, id string, epoch uint64, lease string) Input {
	return k.worker(agentID, protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: id, OwnershipEpoch: epoch, LeaseID: lease})
}

func (k *kit) acceptResultIn(id string) Input {
	return k.coordIn(protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: k.g.Items[id].Contract.Revision})
}

func (k *kit) failIn(id string) Input {
	return k.coordIn(protocol.CmdWorkFail, &protocol.FailWorkPayload{WorkItemID: id, Reason: "broken", Evidence: failureEv})
}

func (k *kit) cancelIn(id string) Input {
	return k.coordIn(protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: id, Reason: "not needed"})
}

func (k *kit) unblockIn(id string) Input {
	return k.coordIn(protocol.CmdWorkUnblock, &protocol.UnblockWorkPayload{WorkItemID: id, Resolution: "use v2"})
}

func (k *kit) createChildIn(id, child string, policy protocol.ChildFailurePolicy) Input {
	return k.coordIn(protocol.CmdMissionCreateChild, &protocol.CreateChildMissionPayload{
		MissionID: "mis-a", ParentWorkItemID: id, ChildMissionID: child, ChildGroupID: "grp-" + child,
		Title: "sub", Objective: "sub work", OnChildFailure: policy,
	})
}

// to drives a fresh WorkItem id to state s, worker w1 owning it where an
// owner exists.
func (k *kit) to(id string, s protocol.WorkItemState) {
	k.t.Helper()
	k.authorize(id)
	if s == protocol.WorkOpen {
		return
	}
	switch s {
	case protocol.WorkFailed:
		k.must(k.failIn(id))
		return
	case protocol.WorkCancelled:
		k.must(k.cancelIn(id))
		return
	}
	k.offer(id, "of-"+id, "w1", "w2")
	if s == protocol.WorkOffered {
		return
	}
	k.must(k.acceptIn("w1", id, "of-"+id))
	if s == protocol.WorkQueued {
		return
	}
	k.must(k.startIn("w1", id, k.epochOf(id)))
	if s == protocol.WorkActive {
		return
	}
	e, l := k.epochOf(id), k.leaseOf(id)
	switch s {
	case protocol.WorkBlocked:
		k.must(k.blockIn("w1", id, e, l))
	case protocol.WorkSubmitted, protocol.WorkVerified:
		k.must(k.submitIn("w1", id, e, l))
		if s == protocol.WorkVerified {
			k.must(k.acceptResultIn(id))
		}
	default:
		k.t.Fatalf("kit cannot reach %s", s)
	}
	k.wantState(id, s)
}
