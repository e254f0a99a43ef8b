package group

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// rowCase is one positive or negative case of a transition-table row.
type rowCase struct {
	name   string
	setup  func(k *kit)
	in     func(k *kit) Input
	child  func(k *kit) ChildOutcome // instead of in, for the linked-child rows
	want   protocol.WorkItemState    // checked when code is empty
	code   protocol.Code
	events []protocol.EventType
	post   func(t *testing.T, w *WorkItem) // extra checks on the accepted result
}

func runRows(t *testing.T, cases []rowCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			if c.setup != nil {
				c.setup(k)
			}
			do := func() (Outcome, error) {
				if c.child != nil {
					return k.childOutcome(c.child(k))
				}
				return k.apply(c.in(k))
			}
			if c.code != "" {
				k.refuseFn(c.name, do, c.code)
				return
			}
			out, err := do()
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if c.events != nil {
				wantEvents(t, out, c.events...)
			}
			if c.want != "" {
				k.wantState("wi", c.want)
			}
			if c.post != nil {
				c.post(t, k.g.Items["wi"])
			}
		})
	}
}

// releasedKeepingOwner: checkpoint, block and submit free the execution
// lease but keep ownership (spec 11.3).
func releasedKeepingOwner(t *testing.T, w *WorkItem) {
	t.Helper()
	if w.Lease != nil || w.Ownership == nil || w.Ownership.OwnerAgentID != "w1" {
		t.Fatalf("lease %+v ownership %+v", w.Lease, w.Ownership)
	}
}

// revoked: failure and cancellation revoke every grant.
func revoked(t *testing.T, w *WorkItem) {
	t.Helper()
	if w.Lease != nil || w.Ownership != nil || w.Offer != nil {
		t.Fatalf("grants survive: lease %+v ownership %+v offer %+v", w.Lease, w.Ownership, w.Offer)
	}
}

func at(s protocol.WorkItemState) func(k *kit) { return func(k *kit) { k.to("wi", s) } }

// TestWorkItemRows has a positive and a negative case for every row of the
// spec 10.2 table; case names start with the row.
func TestWorkItemRows(t *testing.T) {
	propose := func(id string) func(k *kit) Input {
		return func(k *kit) Input {
			return k.worker("w1", protocol.CmdWorkPropose, &protocol.ProposeWorkPayload{ProposalID: id, MissionID: "mis-a", Summary: "split parser"})
		}
	}
	authorizeFrom := func(proposal string) func(k *kit) Input {
		return func(k *kit) Input {
			return k.coordIn(protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi", MissionID: "mis-a", Contract: testContract("wi"), ProposalID: proposal})
		}
	}
	offer := func(k *kit) Input { return k.coordIn(protocol.CmdWorkOffer, k.offerPayload("wi", "of-2", "w2", "w3")) }
	accept := func(agentID string) func(k *kit) Input {
		return func(k *kit) Input { return k.acceptIn(agentID, "wi", "of-wi") }
	}
	grant := func(k *kit) Input {
		return k.human(protocol.CmdApprovalGrantExecution, &protocol.GrantExecutionPayload{ApprovalID: "apr-1", WorkItemID: "wi", ContractRevision: 1})
	}
	start := func(k *kit) Input { return k.startIn("w1", "wi", 1) }
	leased := func(mk func(k *kit, a, id string, e uint64, l string) Input) func(k *kit) Input {
		return func(k *kit) Input {
			w := k.g.Items["wi"]
			lease := "lease-none"
			if w.Lease != nil {
				lease = w.Lease.LeaseID
			}
			return mk(k, "w1", "wi", 1, lease)
		}
	}
	expireOwner := func(s protocol.WorkItemState, d time.Duration) func(k *kit) {
		return func(k *kit) { k.to("wi", s); k.advance(d) }
	}
	child := func(policy protocol.ChildFailurePolicy) func(k *kit) {
		return func(k *kit) { k.to("wi", protocol.WorkQueued); k.must(k.createChildIn("wi", "mis-c", policy)) }
	}
	outcome := func(state protocol.MissionState, childID string) func(k *kit) ChildOutcome {
		return func(k *kit) ChildOutcome {
			return ChildOutcome{ParentWorkItemID: "wi", ChildMissionID: childID, State: state, ApprovalID: "apr-c", CausationID: "evt-c"}
		}
	}

	cases := []rowCase{
		{name: "propose/none→proposal", in: propose("wi"), events: []protocol.EventType{protocol.EvtWorkProposed}},
		{name: "propose/existing-is-not-none", setup: at(protocol.WorkOpen), in: propose("wi"), code: protocol.CodeInvalidStateTransition},

		{name: "authorize/none→open", in: authorizeFrom(""), want: protocol.WorkOpen},
		{name: "authorize/proposal→open", setup: func(k *kit) { k.must(propose("wi")(k)) }, in: authorizeFrom("wi"), want: protocol.WorkOpen},
		{name: "authorize/existing-workitem", setup: at(protocol.WorkOpen), in: authorizeFrom(""), code: protocol.CodeInvalidStateTransition},
		{name: "authorize/proposal-already-authorized", setup: func(k *kit) {
			k.must(propose("pr-1")(k))
			k.must(k.coordIn(protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-0", MissionID: "mis-a", Contract: testContract("wi-0"), ProposalID: "pr-1"}))
		}, in: authorizeFrom("pr-1"), code: protocol.CodeInvalidStateTransition},

		{name: "offer/from-open", setup: at(protocol.WorkOpen), in: offer, want: protocol.WorkOffered},
		{name: "offer/from-offered-replaces", setup: at(protocol.WorkOffered), in: offer, want: protocol.WorkOffered},
		{name: "offer/from-queued-expired-owner", setup: expireOwner(protocol.WorkQueued, 11*time.Minute), in: offer, want: protocol.WorkOffered},
		{name: "offer/from-active-expired-lease", setup: expireOwner(protocol.WorkActive, 3*time.Minute), in: offer, want: protocol.WorkOffered},
		{name: "offer/from-blocked-expired-hold", setup: expireOwner(protocol.WorkBlocked, 31*time.Minute), in: offer, want: protocol.WorkOffered},
		{name: "offer/from-failed", setup: at(protocol.WorkFailed), in: offer, want: protocol.WorkOffered},
		{name: "offer/queued-with-active-owner", setup: at(protocol.WorkQueued), in: offer, code: protocol.CodeInvalidStateTransition},
		{name: "offer/active-with-live-lease", setup: at(protocol.WorkActive), in: offer, code: protocol.CodeInvalidStateTransition},
		{name: "offer/from-submitted", setup: at(protocol.WorkSubmitted), in: offer, code: protocol.CodeInvalidStateTransition},
		{name: "offer/from-verified", setup: at(protocol.WorkVerified), in: offer, code: protocol.CodeInvalidStateTransition},
		{name: "offer/from-cancelled", setup: at(protocol.WorkCancelled), in: offer, code: protocol.CodeInvalidStateTransition},

		{name: "accept_offer/offered→queued", setup: at(protocol.WorkOffered), in: accept("w1"), want: protocol.WorkQueued,
			events: []protocol.EventType{protocol.EvtWorkOfferAccepted}},
		{name: "accept_offer/not-a-candidate", setup: at(protocol.WorkOffered), in: accept("w9"), code: protocol.CodeAuthForbidden},
		{name: "accept_offer/from-open", setup: at(protocol.WorkOpen), in: accept("w1"), code: protocol.CodeInvalidStateTransition},

		{name: "offer_expiry/acceptance-after-expiry", setup: func(k *kit) { k.to("wi", protocol.WorkOffered); k.advance(5 * time.Minute) },
			in: accept("w1"), code: protocol.CodeWorkOfferExpired},
		{name: "offer_expiry/acceptance-just-before-expiry", setup: func(k *kit) { k.to("wi", protocol.WorkOffered); k.advance(5*time.Minute - time.Millisecond) },
			in: accept("w1"), want: protocol.WorkQueued},

		{name: "grant_execution/queued→queued", setup: at(protocol.WorkQueued), in: grant, want: protocol.WorkQueued,
			events: []protocol.EventType{protocol.EvtApprovalExecutionGranted}},
		{name: "grant_execution/from-offered", setup: at(protocol.WorkOffered), in: grant, code: protocol.CodeInvalidStateTransition},
		{name: "grant_execution/by-agent", setup: at(protocol.WorkQueued), in: func(k *kit) Input {
			in := grant(k)
			in.Actor = agent(k.coord)
			return in
		}, code: protocol.CodeAuthForbidden},

		{name: "start/queued→active", setup: at(protocol.WorkQueued), in: start, want: protocol.WorkActive, events: []protocol.EventType{protocol.EvtWorkStarted},
			post: func(t *testing.T, w *WorkItem) {
				l := w.Lease
				if l == nil || l.AgentID != "w1" || l.SessionEpoch != 1 || l.OwnershipEpoch != 1 || l.WorkItemID != "wi" ||
					l.ExpiresAt.Sub(l.StartedAt.Time) != 2*time.Minute || len(l.Renewals) != 0 {
					t.Fatalf("lease %+v", l)
				}
			}},
		{name: "start/from-active", setup: at(protocol.WorkActive), in: start, code: protocol.CodeInvalidStateTransition},
		{name: "start/after-start-deadline", setup: expireOwner(protocol.WorkQueued, 10*time.Minute), in: start, code: protocol.CodeWorkLeaseExpired},
		{name: "start/not-the-owner", setup: at(protocol.WorkQueued), in: func(k *kit) Input { return k.startIn("w2", "wi", 1) }, code: protocol.CodeAuthForbidden},

		{name: "checkpoint/active→queued", setup: at(protocol.WorkActive), in: leased((*kit).checkpointIn), want: protocol.WorkQueued,
			events: []protocol.EventType{protocol.EvtWorkCheckpointed}, post: releasedKeepingOwner},
		{name: "checkpoint/from-queued-has-no-lease", setup: at(protocol.WorkQueued), in: leased((*kit).checkpointIn), code: protocol.CodeWorkLeaseExpired},

		{name: "block/active→blocked", setup: at(protocol.WorkActive), in: leased((*kit).blockIn), want: protocol.WorkBlocked,
			events: []protocol.EventType{protocol.EvtWorkBlocked}, post: func(t *testing.T, w *WorkItem) {
				releasedKeepingOwner(t, w)
				if w.Blocker == nil || w.Blocker.Kind != protocol.ResolutionClarification || w.BlockedUntil == nil {
					t.Fatalf("blocker %+v until %v", w.Blocker, w.BlockedUntil)
				}
			}},
		{name: "block/from-queued-has-no-lease", setup: at(protocol.WorkQueued), in: leased((*kit).blockIn), code: protocol.CodeWorkLeaseExpired},

		{name: "unblock/blocked→queued-owner-valid", setup: at(protocol.WorkBlocked), in: func(k *kit) Input { return k.unblockIn("wi") }, want: protocol.WorkQueued},
		{name: "unblock/blocked→open-ownership-expired", setup: expireOwner(protocol.WorkBlocked, 31*time.Minute), in: func(k *kit) Input { return k.unblockIn("wi") }, want: protocol.WorkOpen},
		{name: "unblock/from-active", setup: at(protocol.WorkActive), in: func(k *kit) Input { return k.unblockIn("wi") }, code: protocol.CodeInvalidStateTransition},
		{name: "unblock/child-blocker", setup: child(protocol.ChildFailureBlock), in: func(k *kit) Input { return k.unblockIn("wi") }, code: protocol.CodeInvalidStateTransition},

		{name: "submit/active→submitted", setup: at(protocol.WorkActive), in: leased((*kit).submitIn), want: protocol.WorkSubmitted,
			events: []protocol.EventType{protocol.EvtWorkSubmitted}, post: releasedKeepingOwner},
		{name: "submit/evidence-misses-a-criterion", setup: at(protocol.WorkActive), in: func(k *kit) Input {
			in := leased((*kit).submitIn)(k)
			in.Payload.(*protocol.SubmitWorkPayload).Evidence = protocol.List[protocol.Evidence]{evidence("wi", "ac-1")}
			return in
		}, code: protocol.CodeInvalidCommand},
		{name: "submit/without-artifacts", setup: at(protocol.WorkActive), in: func(k *kit) Input {
			in := leased((*kit).submitIn)(k)
			in.Payload.(*protocol.SubmitWorkPayload).Artifacts = nil
			return in
		}, code: protocol.CodeInvalidCommand},

		{name: "accept_result/submitted→verified", setup: at(protocol.WorkSubmitted), in: func(k *kit) Input { return k.acceptResultIn("wi") }, want: protocol.WorkVerified},
		{name: "accept_result/from-active", setup: at(protocol.WorkActive), in: func(k *kit) Input { return k.acceptResultIn("wi") }, code: protocol.CodeInvalidStateTransition},
		{name: "accept_result/by-worker", setup: at(protocol.WorkSubmitted), in: func(k *kit) Input {
			in := k.acceptResultIn("wi")
			in.Actor = agent("w1")
			return in
		}, code: protocol.CodeAuthForbidden},

		{name: "fail/from-verified", setup: at(protocol.WorkVerified), in: func(k *kit) Input { return k.failIn("wi") }, code: protocol.CodeInvalidStateTransition},
		{name: "fail/from-cancelled", setup: at(protocol.WorkCancelled), in: func(k *kit) Input { return k.failIn("wi") }, code: protocol.CodeInvalidStateTransition},
		{name: "fail/without-failure-evidence", setup: at(protocol.WorkActive), in: func(k *kit) Input {
			in := k.failIn("wi")
			in.Payload.(*protocol.FailWorkPayload).Evidence = protocol.List[protocol.Evidence]{evidence("wi", "ac-1")}
			return in
		}, code: protocol.CodeInvalidCommand},
		{name: "fail/worker-with-own-lease", setup: at(protocol.WorkActive), in: func(k *kit) Input {
			l := k.leaseOf("wi")
			return k.worker("w1", protocol.CmdWorkFail, &protocol.FailWorkPayload{WorkItemID: "wi", Reason: "tool crashed", Evidence: failureEv, OwnershipEpoch: protocol.Uint64(1), LeaseID: l})
		}, want: protocol.WorkFailed},

		{name: "cancel/from-verified", setup: at(protocol.WorkVerified), in: func(k *kit) Input { return k.cancelIn("wi") }, code: protocol.CodeInvalidStateTransition},
		{name: "cancel/from-failed", setup: at(protocol.WorkFailed), in: func(k *kit) Input { return k.cancelIn("wi") }, code: protocol.CodeInvalidStateTransition},
		{name: "cancel/by-worker", setup: at(protocol.WorkQueued), in: func(k *kit) Input {
			in := k.cancelIn("wi")
			in.Actor = agent("w1")
			return in
		}, code: protocol.CodeAuthForbidden},
		{name: "cancel/by-mission-owner", setup: at(protocol.WorkQueued), in: func(k *kit) Input {
			return k.human(protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi", Reason: "scope cut"})
		}, want: protocol.WorkCancelled},

		{name: "create_child/from-submitted", setup: at(protocol.WorkSubmitted), in: func(k *kit) Input { return k.createChildIn("wi", "mis-c", protocol.ChildFailureBlock) }, code: protocol.CodeInvalidStateTransition},
		{name: "create_child/from-verified", setup: at(protocol.WorkVerified), in: func(k *kit) Input { return k.createChildIn("wi", "mis-c", protocol.ChildFailureBlock) }, code: protocol.CodeInvalidStateTransition},
		{name: "create_child/second-child", setup: child(protocol.ChildFailureBlock), in: func(k *kit) Input { return k.createChildIn("wi", "mis-d", protocol.ChildFailureBlock) }, code: protocol.CodeInvalidStateTransition},

		{name: "child_approved/blocked→verified", setup: child(protocol.ChildFailureBlock), child: outcome(protocol.MissionApproved, "mis-c"), want: protocol.WorkVerified,
			events: []protocol.EventType{protocol.EvtWorkResultAccepted}},
		{name: "child_approved/other-child", setup: child(protocol.ChildFailureBlock), child: outcome(protocol.MissionApproved, "mis-x"), code: protocol.CodeInvalidStateTransition},
		{name: "child_approved/parent-not-blocked", setup: at(protocol.WorkQueued), child: outcome(protocol.MissionApproved, "mis-c"), code: protocol.CodeInvalidStateTransition},

		{name: "child_failed/policy-block→blocked", setup: child(protocol.ChildFailureBlock), child: outcome(protocol.MissionTerminated, "mis-c"), want: protocol.WorkBlocked,
			events: []protocol.EventType{protocol.EvtWorkBlocked}},
		{name: "child_failed/policy-fail→failed", setup: child(protocol.ChildFailureFail), child: outcome(protocol.MissionCancelled, "mis-c"), want: protocol.WorkFailed,
			events: []protocol.EventType{protocol.EvtWorkFailed}},
		{name: "child_failed/not-terminal", setup: child(protocol.ChildFailureFail), child: outcome(protocol.MissionActive, "mis-c"), code: protocol.CodeInvalidCommand},
	}
	// Spec 10.2: fail and cancel from every unfinished state, open … submitted.
	for _, s := range []protocol.WorkItemState{protocol.WorkOpen, protocol.WorkOffered, protocol.WorkQueued,
		protocol.WorkActive, protocol.WorkBlocked, protocol.WorkSubmitted} {
		cases = append(cases,
			rowCase{name: "fail/from-" + string(s), setup: at(s), in: func(k *kit) Input { return k.failIn("wi") }, want: protocol.WorkFailed,
				events: []protocol.EventType{protocol.EvtWorkFailed}, post: revoked},
			rowCase{name: "cancel/from-" + string(s), setup: at(s), in: func(k *kit) Input { return k.cancelIn("wi") }, want: protocol.WorkCancelled,
				events: []protocol.EventType{protocol.EvtWorkCancelled}, post: revoked},
		)
		if s != protocol.WorkSubmitted {
			cases = append(cases, rowCase{name: "create_child/from-" + string(s), setup: at(s),
				in:   func(k *kit) Input { return k.createChildIn("wi", "mis-c", protocol.ChildFailureBlock) },
				want: protocol.WorkBlocked, events: []protocol.EventType{protocol.EvtMissionChildCreated, protocol.EvtWorkBlocked}})
		}
	}
	runRows(t, cases)
}
