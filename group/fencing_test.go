package group

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

func TestFirstAcceptanceWins(t *testing.T) {
	k := newKit(t)
	k.authorize("wi")
	k.offer("wi", "of-1", "w1", "w2", "w3")
	out := k.must(k.acceptIn("w2", "wi", "of-1"))
	grant := out.Events[0].Payload.(*OfferAccepted).Ownership
	if grant == nil || grant.OwnerAgentID != "w2" || grant.OwnershipEpoch != 1 || grant.StartDeadline.Sub(k.now) != 10*time.Minute {
		t.Fatalf("grant %+v, want w2 epoch 1 with a 10m start deadline", grant)
	}
	for _, loser := range []string{"w1", "w3", "w2"} {
		k.refuse(k.acceptIn(loser, "wi", "of-1"), protocol.CodeWorkAlreadyOwned)
	}
	// A loser cannot act on the winner's ownership either.
	k.refuse(k.startIn("w1", "wi", 1), protocol.CodeAuthForbidden)
	k.must(k.startIn("w2", "wi", 1))
}

func TestOfferBoundsAndExpiry(t *testing.T) {
	k := newKit(t)
	k.authorize("wi")
	k.refuse(k.coordIn(protocol.CmdWorkOffer, k.offerPayload("wi", "of-1", "w1", "w2", "w3", "w4")), protocol.CodeInvalidCommand)
	k.refuse(k.coordIn(protocol.CmdWorkOffer, k.offerPayload("wi", "of-1", "w1", "w1")), protocol.CodeInvalidCommand)
	k.refuse(k.coordIn(protocol.CmdWorkOffer, k.offerPayload("wi", "of-1")), protocol.CodeInvalidCommand)
	past := k.offerPayload("wi", "of-1", "w1")
	past.ExpiresAt = protocol.NewTime(k.now)
	k.refuse(k.coordIn(protocol.CmdWorkOffer, past), protocol.CodeInvalidCommand)

	k.offer("wi", "of-1", "w1")
	rev := k.g.Items["wi"].Revision
	// Expiry is not an event: time passes, nothing is emitted, the state
	// stays offered, and acceptance is refused.
	k.advance(6 * time.Minute)
	k.refuse(k.acceptIn("w1", "wi", "of-1"), protocol.CodeWorkOfferExpired)
	k.wantState("wi", protocol.WorkOffered)
	if k.g.Items["wi"].Revision != rev {
		t.Fatal("offer expiry changed the revision")
	}
	// A replacement offer withdraws the old one.
	k.offer("wi", "of-2", "w1", "w2")
	k.refuse(k.acceptIn("w1", "wi", "of-1"), protocol.CodeWorkOfferExpired)
	k.must(k.acceptIn("w1", "wi", "of-2"))
}

// TestLateResultAfterLeaseExpiry follows spec 11.5: the lease lapses, the
// coordinator re-offers from the last checkpoint with a higher epoch, and the
// old owner's results are kept for audit but never complete the WorkItem.
func TestLateResultAfterLeaseExpiry(t *testing.T) {
	k := newKit(t)
	k.to("wi", protocol.WorkActive)
	oldLease := k.leaseOf("wi")
	k.must(k.checkpointIn("w1", "wi", 1, oldLease))
	k.must(k.startIn("w1", "wi", 1))
	lease := k.leaseOf("wi")
	ckpt := k.g.Items["wi"].Checkpoint.CheckpointID

	k.advance(2 * time.Minute) // the lease expires exactly now
	out, err := k.apply(k.submitIn("w1", "wi", 1, lease))
	if protocol.CodeOf(err) != protocol.CodeWorkLeaseExpired {
		t.Fatalf("late submit: %v, want WORK_LEASE_EXPIRED", err)
	}
	if len(out.Events) != 0 || len(out.Effects) != 1 {
		t.Fatalf("late submit outcome %+v, want one audit effect and no events", out)
	}
	if lr, ok := out.Effects[0].(LateResult); !ok || lr.LeaseID != lease || lr.Code != protocol.CodeWorkLeaseExpired {
		t.Fatalf("audit effect %+v", out.Effects[0])
	}
	k.wantState("wi", protocol.WorkActive)

	// The coordinator fences the expired owner and re-offers.
	out = k.offer("wi", "of-2", "w2")
	ev := out.Events[0].Payload.(*OfferCreated)
	if ev.FencedOwnershipEpoch == nil || *ev.FencedOwnershipEpoch != 1 || ev.Checkpoint == nil || ev.Checkpoint.CheckpointID != ckpt {
		t.Fatalf("re-offer %+v, want epoch 1 fenced and the last checkpoint", ev)
	}
	k.must(k.acceptIn("w2", "wi", "of-2"))
	if k.epochOf("wi") != 2 {
		t.Fatalf("new epoch %d, want 2", k.epochOf("wi"))
	}
	k.must(k.worker("w2", protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: "wi", OwnershipEpoch: 2, ResumeFromCheckpointID: ckpt}))

	// Now the old owner's submission is fenced by ownership and audited.
	before := snapshot(t, k.g)
	out, err = k.apply(k.submitIn("w1", "wi", 1, lease))
	if protocol.CodeOf(err) != protocol.CodeWorkStaleOwnership || len(out.Effects) != 1 || len(out.Events) != 0 {
		t.Fatalf("stale submit: %v %+v", err, out)
	}
	if snapshot(t, k.g) != before {
		t.Fatal("late result changed state")
	}
	k.wantState("wi", protocol.WorkActive)
	k.must(k.submitIn("w2", "wi", 2, k.leaseOf("wi")))
	k.wantState("wi", protocol.WorkSubmitted)
}

func TestFencingErrors(t *testing.T) {
	t.Run("older-leaseId-same-epoch", func(t *testing.T) {
		k := newKit(t)
		k.to("wi", protocol.WorkActive)
		old := k.leaseOf("wi")
		k.must(k.checkpointIn("w1", "wi", 1, old))
		k.must(k.startIn("w1", "wi", 1))
		if k.leaseOf("wi") == old || k.epochOf("wi") != 1 {
			t.Fatal("restart must issue a new lease under the same epoch")
		}
		for _, in := range []Input{k.renewIn("w1", "wi", 1, old), k.checkpointIn("w1", "wi", 1, old), k.blockIn("w1", "wi", 1, old)} {
			k.refuse(in, protocol.CodeWorkLeaseExpired)
		}
	})
	t.Run("older-ownership-epoch", func(t *testing.T) {
		k := newKit(t)
		k.to("wi", protocol.WorkQueued)
		k.advance(10 * time.Minute)
		k.offer("wi", "of-2", "w1")
		k.refuse(k.startIn("w1", "wi", 1), protocol.CodeWorkStaleOwnership) // fenced, not yet re-owned
		k.must(k.acceptIn("w1", "wi", "of-2"))
		k.refuse(k.startIn("w1", "wi", 1), protocol.CodeWorkStaleOwnership)
		k.refuse(k.startIn("w1", "wi", 3), protocol.CodeInvalidCommand) // never granted
		k.must(k.startIn("w1", "wi", 2))
	})
	t.Run("replaced-session", func(t *testing.T) {
		k := newKit(t)
		k.to("wi", protocol.WorkActive)
		in := k.renewIn("w1", "wi", 1, k.leaseOf("wi"))
		in.SessionEpoch = protocol.Uint64(2)
		k.refuse(in, protocol.CodeWorkLeaseExpired)
	})
	t.Run("stale-coordinator", func(t *testing.T) {
		k := newKit(t)
		k.to("wi", protocol.WorkSubmitted)
		oldIn := k.acceptResultIn("wi")
		k.assign("coord-2")
		k.refuse(oldIn, protocol.CodeAuthStaleCoordinator)
		lapsed := k.acceptResultIn("wi")
		k.advance(10 * time.Hour)
		k.refuse(lapsed, protocol.CodeAuthStaleCoordinator)
		noEpoch := k.acceptResultIn("wi")
		noEpoch.CoordinatorEpoch = nil
		k.refuse(noEpoch, protocol.CodeInvalidCommand)
	})
	t.Run("approval-required", func(t *testing.T) {
		k := newKit(t)
		c := testContract("wi")
		c.Risk = protocol.Risk{Class: protocol.RiskHigh, PreExecutionApproval: true}
		k.authorizeContract("wi", c)
		k.offer("wi", "of-1", "w1")
		k.must(k.acceptIn("w1", "wi", "of-1"))
		k.refuse(k.startIn("w1", "wi", 1), protocol.CodeApprovalRequired)
		exp := protocol.NewTime(k.now.Add(time.Minute))
		k.must(k.input(orgPolicy, protocol.CmdApprovalGrantExecution, &protocol.GrantExecutionPayload{ApprovalID: "apr-1", WorkItemID: "wi", ContractRevision: 1, ExpiresAt: &exp}))
		k.advance(time.Minute) // the approval lapses
		k.refuse(k.startIn("w1", "wi", 1), protocol.CodeApprovalRequired)
		k.must(k.human(protocol.CmdApprovalGrantExecution, &protocol.GrantExecutionPayload{ApprovalID: "apr-2", WorkItemID: "wi", ContractRevision: 1}))
		k.must(k.startIn("w1", "wi", 1))
	})
	t.Run("revision-conflict-applies-nothing", func(t *testing.T) {
		k := newKit(t)
		k.to("wi", protocol.WorkOffered)
		in := k.acceptIn("w1", "wi", "of-wi")
		in.ExpectedRevision = protocol.Uint64(k.g.Items["wi"].Revision - 1)
		e := k.refuse(in, protocol.CodeRevisionConflict)
		if e.Details["currentRevision"] != k.g.Items["wi"].Revision {
			t.Fatalf("details %v", e.Details)
		}
		m := cancelMission(k)
		m.ExpectedRevision = protocol.Uint64(0)
		k.refuse(m, protocol.CodeRevisionConflict)
		in.ExpectedRevision = protocol.Uint64(k.g.Items["wi"].Revision)
		k.must(in)
	})
}

func TestLeaseRenewal(t *testing.T) {
	k := newKit(t)
	k.to("wi", protocol.WorkActive)
	lease := k.leaseOf("wi")
	for i := 0; i < 3; i++ {
		k.advance(90 * time.Second) // inside the 2m lease each time
		out := k.must(k.renewIn("w1", "wi", 1, lease))
		wantEvents(t, out, protocol.EvtWorkProgressed)
		l := k.g.Items["wi"].Lease
		if l.LeaseID != lease || len(l.Renewals) != i+1 || l.ExpiresAt.Sub(k.now) != 2*time.Minute {
			t.Fatalf("after renewal %d: %+v", i+1, l)
		}
	}
	k.refuse(k.renewIn("w2", "wi", 1, lease), protocol.CodeAuthForbidden)
	k.advance(2 * time.Minute)
	k.refuse(k.renewIn("w1", "wi", 1, lease), protocol.CodeWorkLeaseExpired)
}

func TestDependencies(t *testing.T) {
	dep := func(id string, p protocol.DependencyPolicy) protocol.Dependency {
		return protocol.Dependency{WorkItemID: id, Policy: p}
	}
	insert := func(k *kit, id string, deps ...protocol.Dependency) Input {
		return k.coordIn(protocol.CmdDependencyInsert, &protocol.InsertDependencyPayload{
			WorkItemID: id, ContractRevision: k.g.Items[id].Contract.Revision + 1, Dependencies: protocol.List[protocol.Dependency](deps),
		})
	}
	t.Run("eligible-only-when-policy-met", func(t *testing.T) {
		k := newKit(t)
		k.to("a", protocol.WorkActive)
		k.authorize("b", dep("a", protocol.DependencySubmitted))
		k.authorize("c", dep("a", protocol.DependencyVerified))
		for _, id := range []string{"b", "c"} {
			k.offer(id, "of-"+id, "w2")
			k.must(k.acceptIn("w2", id, "of-"+id))
			e := k.refuse(k.startIn("w2", id, 1), protocol.CodeInvalidStateTransition)
			if e.Details["reason"] != "dependencies" {
				t.Fatalf("details %v", e.Details)
			}
		}
		k.must(k.submitIn("w1", "a", 1, k.leaseOf("a")))
		k.must(k.startIn("w2", "b", 1))
		k.refuse(k.startIn("w2", "c", 1), protocol.CodeInvalidStateTransition)
		k.must(k.acceptResultIn("a"))
		k.must(k.startIn("w2", "c", 1))
		if len(k.g.DependenciesMet("c")) != 0 {
			t.Fatal("DependenciesMet disagrees with start")
		}
	})
	t.Run("cycle-rejected", func(t *testing.T) {
		k := newKit(t)
		k.authorize("a")
		k.authorize("b", dep("a", protocol.DependencyVerified))
		k.authorize("c", dep("b", protocol.DependencyVerified))
		e := k.refuse(insert(k, "a", dep("c", protocol.DependencyTerminal)), protocol.CodeInvalidCommand)
		if cyc, _ := e.Details["cycle"].([]string); len(cyc) != 4 {
			t.Fatalf("cycle details %v, want a→c→b→a", e.Details)
		}
		k.refuse(insert(k, "a", dep("a", protocol.DependencyVerified)), protocol.CodeInvalidCommand)
		k.refuse(insert(k, "a", dep("zz", protocol.DependencyVerified)), protocol.CodeInvalidCommand)
		bad := testContract("d", dep("d", protocol.DependencyVerified))
		k.refuse(k.coordIn(protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "d", MissionID: "mis-a", Contract: bad}), protocol.CodeInvalidCommand)
		// A non-cyclic insertion is a contract revision.
		out := k.must(insert(k, "c", dep("a", protocol.DependencySubmitted)))
		wantEvents(t, out, protocol.EvtWorkContractRevised)
		if c := k.g.Items["c"].Contract; c.Revision != 2 || len(c.Dependencies) != 2 {
			t.Fatalf("revised contract %+v", c)
		}
	})
	t.Run("revision-requires-renewed-acceptance", func(t *testing.T) {
		k := newKit(t)
		k.to("a", protocol.WorkVerified)
		k.to("wi", protocol.WorkQueued)
		stale := insert(k, "wi", dep("a", protocol.DependencyVerified))
		stale.Payload.(*protocol.InsertDependencyPayload).ContractRevision = 1
		k.refuse(stale, protocol.CodeRevisionConflict)
		k.must(insert(k, "wi", dep("a", protocol.DependencyVerified)))
		e := k.refuse(k.startIn("w1", "wi", 1), protocol.CodeInvalidStateTransition)
		if e.Details["reason"] != "renewed_acceptance_required" {
			t.Fatalf("details %v", e.Details)
		}
		k.refuse(k.acceptIn("w2", "wi", "of-wi"), protocol.CodeWorkAlreadyOwned)
		out := k.must(k.acceptIn("w1", "wi", "of-wi"))
		if ev := out.Events[0].Payload.(*OfferAccepted); !ev.RenewedAcceptance || ev.Ownership.OwnershipEpoch != 1 {
			t.Fatalf("renewal %+v keeps the epoch", ev)
		}
		k.must(k.startIn("w1", "wi", 1))
	})
}

func TestContractRules(t *testing.T) {
	t.Run("incomplete", func(t *testing.T) {
		mutations := map[string]func(c *protocol.WorkContract){
			"/goal":               func(c *protocol.WorkContract) { c.Goal = "" },
			"/acceptanceCriteria": func(c *protocol.WorkContract) { c.AcceptanceCriteria = nil },
			"/budgets":            func(c *protocol.WorkContract) { c.Budgets = protocol.Budgets{} },
			"/deadline":           func(c *protocol.WorkContract) { c.Deadline = protocol.Time{} },
			"/risk/class":         func(c *protocol.WorkContract) { c.Risk.Class = "" },
		}
		for ptr, mutate := range mutations {
			k := newKit(t)
			c := testContract("wi")
			mutate(&c)
			e := k.refuse(k.coordIn(protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi", MissionID: "mis-a", Contract: c}), protocol.CodeWorkContractIncomplete)
			if m, _ := e.Details["missing"].([]string); len(m) != 1 || m[0] != ptr {
				t.Fatalf("%s: details %v", ptr, e.Details)
			}
		}
	})
	t.Run("substantial-revision", func(t *testing.T) {
		k := newKit(t)
		k.authorize("wi")
		p := k.offerPayload("wi", "of-1", "w1")
		p.Contract.Goal = "implement wi differently"
		k.refuse(k.coordIn(protocol.CmdWorkOffer, p), protocol.CodeInvalidCommand) // same revision
		p.Contract.Revision = 2
		wantEvents(t, k.must(k.coordIn(protocol.CmdWorkOffer, p)), protocol.EvtWorkContractRevised, protocol.EvtWorkOfferCreated)
		stale := k.acceptIn("w1", "wi", "of-1")
		stale.Payload.(*protocol.AcceptOfferPayload).ContractRevision = 1
		k.refuse(stale, protocol.CodeRevisionConflict)
		// Notes are prose: no new revision, and a bumped one is refused.
		q := k.offerPayload("wi", "of-2", "w1")
		q.Contract.Notes = "see the design doc"
		wantEvents(t, k.must(k.coordIn(protocol.CmdWorkOffer, q)), protocol.EvtWorkOfferCreated)
		r := k.offerPayload("wi", "of-3", "w1")
		r.Contract.Revision = 3
		k.refuse(k.coordIn(protocol.CmdWorkOffer, r), protocol.CodeInvalidCommand)
		k.must(k.acceptIn("w1", "wi", "of-2"))
	})
}

// TestMessagesNeverAuthorize: whatever a message says, the state machines
// refuse it and nothing changes (docs/design.md §11).
func TestMessagesNeverAuthorize(t *testing.T) {
	k := newKit(t)
	k.to("wi", protocol.WorkSubmitted)
	for _, text := range []string{"approve", "start work on wi", "accept_result wi"} {
		k.refuse(k.human(protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m-1", ConversationID: "c-1", Text: text}), protocol.CodeInvalidCommand)
	}
	k.refuse(k.coordIn(protocol.CmdMessageCorrect, &protocol.CorrectMessagePayload{MessageID: "m-1", Text: "approved"}), protocol.CodeInvalidCommand)
	k.wantState("wi", protocol.WorkSubmitted)
}

// TestChildMissionLifecycle wires the effects between a parent and a child
// Group the way the pipeline will.
func TestChildMissionLifecycle(t *testing.T) {
	k := newKit(t)
	k.to("wi", protocol.WorkActive)
	out := k.must(k.createChildIn("wi", "mis-c", protocol.ChildFailureBlock))
	req, ok := out.Effects[0].(ChildMissionRequested)
	if !ok || req.Link.Owner != owner || req.Link.Parent.WorkItemID != "wi" {
		t.Fatalf("effects %+v", out.Effects)
	}
	w := k.g.Items["wi"]
	if w.Lease != nil || w.Ownership == nil || !w.OwnerActive(k.now.Add(1000*time.Hour)) {
		t.Fatal("the child must protect ownership and release the lease")
	}

	child := NewGroup("grp-mis-c", testLimits())
	if _, err := child.CreateLinkedMission(req.Link, k.now); err != nil {
		t.Fatal(err)
	}
	if _, err := child.CreateLinkedMission(req.Link, k.now); protocol.CodeOf(err) != protocol.CodeInvalidStateTransition {
		t.Fatalf("second creation: %v", err)
	}
	// A grandchild may not reuse an ancestor's id.
	cin := Input{ActionID: "c-1", GroupID: "grp-mis-c", Type: protocol.CmdMissionAssignCoordinator, Actor: owner,
		Payload: &protocol.AssignCoordinatorPayload{MissionID: "mis-c", AgentID: "coord", LeaseDurationMs: 3600000}}
	if _, err := child.Apply(cin, k.now); err != nil {
		t.Fatal(err)
	}
	cancel := Input{ActionID: "c-2", GroupID: "grp-mis-c", Type: protocol.CmdMissionCancel, Actor: owner,
		Payload: &protocol.CancelMissionPayload{MissionID: "mis-c", Reason: "dead end"}}
	cout, err := child.Apply(cancel, k.now)
	if err != nil {
		t.Fatal(err)
	}
	notice, ok := cout.Effects[0].(ParentNotice)
	if !ok || notice.ParentGroupID != "grp-a" || notice.Outcome.State != protocol.MissionCancelled {
		t.Fatalf("child effects %+v", cout.Effects)
	}
	if _, err := k.childOutcome(notice.Outcome); err != nil {
		t.Fatal(err)
	}
	k.wantState("wi", protocol.WorkBlocked)
	// The block policy leaves it to the coordinator; the protected
	// ownership is bounded again.
	k.must(k.unblockIn("wi"))
	k.wantState("wi", protocol.WorkQueued)
}
