package authoritylite

import (
	"context"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// storedEvents counts every event in the log, the Organization's and each
// Group's.
func storedEvents(t *testing.T, s *Service) int {
	t.Helper()
	n := 0
	count := func(_, _ []byte) error { n++; return nil }
	err := s.db.View(func(tx logstore.Tx) error {
		if err := tx.Bucket(bucketOrg).Bucket(bucketEvents).ForEach(count); err != nil {
			return err
		}
		groups := tx.Bucket(bucketGroups)
		return groups.ForEachBucket(func(k []byte) error {
			return groups.Bucket(k).Bucket(bucketEvents).ForEach(count)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// refusalRow is the negative test of one event type: a setup the
// authority accepts, then the command that would emit the type, refused.
type refusalRow struct {
	setup  func(k *svc)
	refuse func(k *svc) error
	code   protocol.Code
}

// activeItem drives wi-1 to active under w1's lease.
func activeItem(k *svc) (epoch uint64, lease string) {
	w := k.toActive("wi-1")
	return w.Ownership.OwnershipEpoch, w.Lease.LeaseID
}

// claimCoordinator stamps the Mission's coordinator epoch on a command of
// another actor, so that it reaches the check of who holds the lease.
func claimCoordinator(k *svc) func(*protocol.Envelope) {
	m, _ := k.s.Mission("grp-a")
	return func(e *protocol.Envelope) { e.CoordinatorEpoch = protocol.Uint64(m.Coordinator.CoordinatorEpoch) }
}

func lease(k *svc) (uint64, string) {
	w := k.item("wi-1")
	return w.Ownership.OwnershipEpoch, w.Lease.LeaseID
}

// refusalRows holds, for every event type the authority emits, a command
// that would emit it and is refused (every event type's positive test is
// TestEventBytesEveryType).
var refusalRows = map[protocol.EventType]refusalRow{
	protocol.EvtMissionCreated: {refuse: func(k *svc) error {
		_, err := k.do(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-x", Title: "again", Objective: "o", PriorityClass: protocol.PriorityNormal})
		return err
	}, code: protocol.CodeInvalidStateTransition},
	protocol.EvtMissionCoordinatorAssigned: {refuse: func(k *svc) error {
		_, err := k.do(k.coord, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-a", AgentID: "w1", LeaseDurationMs: 60000})
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtMissionCoordinatorRenewed: {refuse: func(k *svc) error {
		_, err := k.do(k.w["w1"], protocol.CmdMissionRenewCoordinator, &protocol.RenewCoordinatorPayload{MissionID: "mis-a", LeaseDurationMs: 60000}, claimCoordinator(k))
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtMissionSubmittedForApproval: {refuse: func(k *svc) error {
		_, err := k.do(k.w["w1"], protocol.CmdMissionSubmitForApproval, &protocol.SubmitForApprovalPayload{MissionID: "mis-a", Summary: "done", Artifacts: protocol.List[string]{},
			Evidence: protocol.List[protocol.Evidence]{evidence("mis-a", "ac-1")}}, claimCoordinator(k))
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtMissionApproved: {refuse: func(k *svc) error {
		_, err := k.do(k.alice, protocol.CmdMissionApprove, &protocol.ApproveMissionPayload{MissionID: "mis-a", ApprovalID: "apr-1"})
		return err
	}, code: protocol.CodeInvalidStateTransition},
	protocol.EvtMissionChangesRequested: {refuse: func(k *svc) error {
		_, err := k.do(k.alice, protocol.CmdMissionRequestChanges, &protocol.RequestChangesPayload{MissionID: "mis-a", Changes: protocol.List[string]{"more"}})
		return err
	}, code: protocol.CodeInvalidStateTransition},
	protocol.EvtMissionCancelled: {refuse: func(k *svc) error {
		_, err := k.do(k.w["w1"], protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "mine"})
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtMissionTerminated: {refuse: func(k *svc) error {
		_, err := k.do(k.alice, protocol.CmdMissionTerminate, &protocol.TerminateMissionPayload{MissionID: "mis-a", Reason: "owner may not"})
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtMissionChildCreated: {setup: func(k *svc) { k.toActive("wi-1") }, refuse: func(k *svc) error {
		_, err := k.do(k.w["w1"], protocol.CmdMissionCreateChild, &protocol.CreateChildMissionPayload{MissionID: "mis-a", ParentWorkItemID: "wi-1", ChildMissionID: "mis-c",
			ChildGroupID: "grp-c", Title: "child", Objective: "o", OnChildFailure: protocol.ChildFailureFail}, claimCoordinator(k))
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtMissionFollowUpCreated: {refuse: func(k *svc) error {
		_, err := k.alice.Do(context.Background(), protocol.CmdMissionCreateFollowUp, "grp-f", &protocol.CreateFollowUpPayload{MissionID: "mis-f", FollowUpOf: "mis-a",
			Title: "next", Objective: "o", PriorityClass: protocol.PriorityNormal})
		return err
	}, code: protocol.CodeInvalidStateTransition},

	protocol.EvtMembershipChanged: {refuse: func(k *svc) error {
		_, err := k.do(k.w["w1"], protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent("w2"), Roles: protocol.List[protocol.Role]{protocol.RoleCoordinator}}, claimCoordinator(k))
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtMembershipEnded: {refuse: func(k *svc) error {
		_, err := k.do(k.w["w1"], protocol.CmdMembershipEnd, &protocol.EndMembershipPayload{Principal: agent("w2"), Reason: "not mine to end"}, claimCoordinator(k))
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtMembershipDelegationGranted: {refuse: func(k *svc) error {
		_, err := k.do(k.w["w1"], protocol.CmdMembershipGrantDelegation, &protocol.GrantDelegationPayload{DelegationID: "del-1", Delegate: agent("w2"),
			CommandTypes: protocol.List[string]{string(protocol.CmdWorkOffer)}, ExpiresAt: protocol.NewTime(t0.Add(time.Hour))}, claimCoordinator(k))
		return err
	}, code: protocol.CodeAuthForbidden},

	protocol.EvtMessagePosted: {setup: func(k *svc) {
		k.ok(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m1", ConversationID: "c", Text: "hello"})
	}, refuse: func(k *svc) error {
		_, err := k.do(k.w["w2"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m1", ConversationID: "c", Text: "same id"})
		return err
	}, code: protocol.CodeInvalidCommand},
	protocol.EvtMessageCorrected: {setup: func(k *svc) {
		k.ok(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m1", ConversationID: "c", Text: "hello"})
	}, refuse: func(k *svc) error {
		_, err := k.do(k.w["w2"], protocol.CmdMessageCorrect, &protocol.CorrectMessagePayload{MessageID: "m1", Text: "not the author"})
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtMessageRetracted: {setup: func(k *svc) {
		k.ok(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m1", ConversationID: "c", Text: "hello"})
	}, refuse: func(k *svc) error {
		_, err := k.do(k.w["w2"], protocol.CmdMessageRetract, &protocol.RetractMessagePayload{MessageID: "m1", Reason: "not the author"})
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtMessageRedacted: {setup: func(k *svc) {
		k.ok(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m1", ConversationID: "c", Text: "hello"})
	}, refuse: func(k *svc) error {
		_, err := k.do(k.w["w2"], protocol.CmdMessageRedact, &protocol.RedactMessagePayload{MessageID: "m1", Reason: "neither author nor owner"})
		return err
	}, code: protocol.CodeAuthForbidden},

	protocol.EvtWorkProposed: {setup: func(k *svc) {
		k.ok(k.w["w1"], protocol.CmdWorkPropose, &protocol.ProposeWorkPayload{ProposalID: "prop-1", MissionID: "mis-a", Summary: "add tests"})
	}, refuse: func(k *svc) error {
		_, err := k.do(k.w["w2"], protocol.CmdWorkPropose, &protocol.ProposeWorkPayload{ProposalID: "prop-1", MissionID: "mis-a", Summary: "same id"})
		return err
	}, code: protocol.CodeInvalidStateTransition},
	protocol.EvtWorkAuthorized: {refuse: func(k *svc) error {
		c := k.policyContract("wi-1", "")
		c.AcceptanceCriteria = nil
		_, err := k.do(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-1", MissionID: "mis-a", Contract: c})
		return err
	}, code: protocol.CodeWorkContractIncomplete},
	protocol.EvtWorkOfferCreated: {setup: func(k *svc) { must(k.t.(*testing.T), k.authorizeGoal("wi-1", "")) }, refuse: func(k *svc) error {
		_, err := k.do(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-1", OfferID: "off-1", Contract: k.item("wi-1").Contract,
			Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: basis(k.clk.Now())}}, ExpiresAt: protocol.NewTime(k.clk.Now().Add(-time.Second))})
		return err
	}, code: protocol.CodeInvalidCommand},
	protocol.EvtWorkOfferAccepted: {setup: func(k *svc) { must(k.t.(*testing.T), k.authorizeGoal("wi-1", "")); k.offerTo("wi-1") }, refuse: func(k *svc) error {
		_, err := k.do(k.w["w2"], protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: "wi-1", OfferID: "off-wi-1", ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())})
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtWorkContractRevised: {setup: func(k *svc) { k.toActive("wi-1"); must(k.t.(*testing.T), k.authorizeGoal("wi-2", "")) }, refuse: func(k *svc) error {
		_, err := k.do(k.coord, protocol.CmdDependencyInsert, &protocol.InsertDependencyPayload{WorkItemID: "wi-1", ContractRevision: 2,
			Dependencies: protocol.List[protocol.Dependency]{{WorkItemID: "wi-2", Policy: protocol.DependencyVerified}}})
		return err
	}, code: protocol.CodeInvalidStateTransition},
	protocol.EvtWorkStarted: {setup: func(k *svc) {
		must(k.t.(*testing.T), k.authorizeGoal("wi-1", ""))
		k.offerTo("wi-1")
		must(k.t.(*testing.T), k.accept("wi-1"))
	}, refuse: func(k *svc) error {
		_, err := k.do(k.w["w2"], protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: k.item("wi-1").Ownership.OwnershipEpoch})
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtWorkProgressed: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		epoch, _ := lease(k)
		_, err := k.do(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: "lease-other", Progress: progress(k.clk.Now())})
		return err
	}, code: protocol.CodeWorkLeaseExpired},
	protocol.EvtWorkCheckpointed: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		epoch, l := lease(k)
		_, err := k.do(k.w["w1"], protocol.CmdWorkCheckpoint, &protocol.CheckpointWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch + 1, LeaseID: l,
			CheckpointID: "cp-1", StateDigest: protocol.Digest([]byte("s")), Progress: progress(k.clk.Now()), Reason: protocol.CheckpointPreempted})
		return err
	}, code: protocol.CodeInvalidCommand},
	protocol.EvtWorkBlocked: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		epoch, l := lease(k)
		_, err := k.do(k.w["w1"], protocol.CmdWorkBlock, &protocol.BlockWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: l,
			CheckpointID: "cp-1", StateDigest: protocol.Digest([]byte("s")), Resolution: protocol.Resolution{Kind: protocol.ResolutionClarification, Detail: "which branch?"}},
			func(e *protocol.Envelope) { e.SessionEpoch = protocol.Uint64(*e.SessionEpoch + 1) })
		return err
	}, code: protocol.CodeAuthStaleSession},
	protocol.EvtWorkUnblocked: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		_, err := k.do(k.coord, protocol.CmdWorkUnblock, &protocol.UnblockWorkPayload{WorkItemID: "wi-1", Resolution: "it was never blocked"})
		return err
	}, code: protocol.CodeInvalidStateTransition},
	protocol.EvtWorkSubmitted: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		epoch, l := lease(k)
		_, err := k.do(k.w["w1"], protocol.CmdWorkSubmit, &protocol.SubmitWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: l,
			Artifacts: protocol.List[string]{protocol.Digest([]byte("x"))}, Evidence: protocol.List[protocol.Evidence]{evidence("wi-1", "ac-1")}})
		return err
	}, code: protocol.CodeInvalidCommand},
	protocol.EvtWorkResultAccepted: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		_, err := k.do(k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: "wi-1", ContractRevision: 1})
		return err
	}, code: protocol.CodeInvalidStateTransition},
	protocol.EvtWorkFailed: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		epoch, l := lease(k)
		_, err := k.do(k.w["w2"], protocol.CmdWorkFail, &protocol.FailWorkPayload{WorkItemID: "wi-1", Reason: "not mine", Evidence: failureEv, OwnershipEpoch: &epoch, LeaseID: l})
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtWorkCancelled: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		_, err := k.do(k.w["w1"], protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "the worker may not"}, claimCoordinator(k))
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtApprovalExecutionGranted: {setup: func(k *svc) {
		c := k.policyContract("wi-1", "")
		c.Risk.PreExecutionApproval = true
		k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-1", MissionID: "mis-a", Contract: c})
	}, refuse: func(k *svc) error {
		_, err := k.do(k.coord, protocol.CmdApprovalGrantExecution, &protocol.GrantExecutionPayload{ApprovalID: "apr-1", WorkItemID: "wi-1", ContractRevision: 1})
		return err
	}, code: protocol.CodeAuthForbidden},

	protocol.EvtArtifactPublished: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		epoch, l := lease(k)
		data := []byte("never stored")
		m := protocol.ArtifactManifest{ContentHash: protocol.Digest(data), MediaType: "text/plain", Schema: protocol.ManifestSchema("", "text/plain"),
			Producer:  protocol.ArtifactProducer{AgentID: "w1", AgentVersion: "1.0.0", AgentCardHash: k.s.org.agent("w1").CardHash},
			MissionID: "mis-a", GroupID: "grp-a", WorkItemID: "wi-1", SourceArtifacts: protocol.List[string]{}, ToolVersions: protocol.StringMap{},
			CreatedAt: protocol.NewTime(k.clk.Now()), Classification: protocol.ClassInternal, Size: uint64(len(data)), URI: "mwp-artifact:x"}
		_, err := k.do(k.w["w1"], protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: signedManifest(k.t.(*testing.T), m, k.w["w1"].Key),
			OwnershipEpoch: protocol.Uint64(epoch), LeaseID: l})
		return err
	}, code: protocol.CodeInvalidCommand},
	protocol.EvtPolicyCooperationOverrideGranted: {refuse: func(k *svc) error {
		_, err := k.do(k.coord, protocol.CmdPolicyGrantCooperationOverride, &protocol.CooperationOverrideGrant{GrantID: "ovr-1", MissionID: "mis-a", GroupID: "grp-a",
			Policy: PolicyOpenWorkItems, Grantee: agent("coord"), TargetCommandType: protocol.CmdWorkAuthorize, TargetActionID: "act-1", Reason: "self-granted",
			Approver: agent("coord"), GrantedAt: protocol.NewTime(k.clk.Now()), ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Hour))})
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtCooperationOverrideConsumed: {setup: func(k *svc) {
		k.s.cfg.Policy.MaxOpenWorkItems = 1
		must(k.t.(*testing.T), k.authorizeGoal("wi-1", ""))
		k.ok(k.alice, protocol.CmdPolicyGrantCooperationOverride, &protocol.CooperationOverrideGrant{GrantID: "ovr-1", MissionID: "mis-a", GroupID: "grp-a",
			Policy: PolicyOpenWorkItems, Grantee: agent("coord"), TargetCommandType: protocol.CmdWorkAuthorize, TargetActionID: "act-wi-2", Reason: "one more",
			Approver: owner, GrantedAt: protocol.NewTime(k.clk.Now()), ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Hour))})
	}, refuse: func(k *svc) error {
		_, err := k.do(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-2", MissionID: "mis-a", Contract: k.policyContract("wi-2", "")},
			func(e *protocol.Envelope) { e.ActionID, e.OverrideGrantID = "act-other", "ovr-1" })
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtContextPublished: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		p := k.signedContext(nil, func(p *protocol.ContextPackage) { p.Scope.MissionID = "mis-b" }) // scoped to another Mission
		_, err := k.do(k.coord, protocol.CmdContextPublish, &protocol.PublishContextPayload{Package: p})
		return err
	}, code: protocol.CodeInvalidCommand},
	protocol.EvtGroupSnapshotCreated: {refuse: func(k *svc) error {
		_, err := k.s.Compact("grp-none", 0)
		return err
	}, code: protocol.CodeGroupNotFound},
	protocol.EvtGroupArchived: {refuse: func(k *svc) error {
		pk := mustKey(k.t, protocol.ActorService, "org-policy")
		if err := k.s.AddPrincipal(protocol.ActorService, "org-policy", pk.Public()); err != nil {
			return err
		}
		snap, err := k.s.SnapshotDocument("grp-a")
		if err != nil {
			return err
		}
		_, err = k.do(k.s.Principal(orgPolicy, pk), protocol.CmdGroupArchive, &protocol.ArchiveGroupPayload{Snapshot: snap, Reason: "the Mission is still active"})
		return err
	}, code: protocol.CodeInvalidStateTransition},
	protocol.EvtResourceUsageRecorded: {setup: func(k *svc) { activeItem(k) }, refuse: func(k *svc) error {
		epoch, l := lease(k)
		_, err := k.do(k.w["w2"], protocol.CmdResourceUsageRecord, &protocol.RecordResourceUsagePayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: l,
			UsageDelta: protocol.Usage{Tokens: 10}})
		return err
	}, code: protocol.CodeAuthForbidden},

	protocol.EvtAgentCardRegistered: {refuse: func(k *svc) error {
		w4 := k.s.Principal(agent("w4"), mustKey(k.t, protocol.ActorAgent, "w4"))
		card := protocol.AgentCard{AgentID: "w5", AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: "x", Keys: protocol.List[protocol.PublicKey]{w4.Key.Public().Encode()},
			Capabilities: protocol.List[protocol.Capability]{{ID: "x", Version: "1.0.0"}}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}, MaxConcurrency: 1, IssuedAt: protocol.NewTime(k.clk.Now())}
		signed, err := protocol.SignedCard(card, w4.Key)
		if err != nil {
			return err
		}
		_, err = w4.Do(context.Background(), protocol.CmdAgentCardRegister, "", &protocol.RegisterAgentCardPayload{AgentCard: signed})
		return err
	}, code: protocol.CodeAuthForbidden},
	protocol.EvtSessionOpened: {refuse: func(k *svc) error {
		a := k.s.org.agent("w1")
		_, err := k.w["w1"].Do(context.Background(), protocol.CmdSessionOpen, "", &protocol.OpenSessionPayload{AgentID: "w1", SessionEpoch: a.SessionEpoch + 2, AgentCardHash: a.CardHash})
		return err
	}, code: protocol.CodeAuthStaleSession},
}

// TestEveryEventTypeRefused is the negative half of the per-type tests: for
// every event type, the command that would emit it is refused with its
// code, and the log is unchanged (nothing accepted is lost or changed).
func TestEveryEventTypeRefused(t *testing.T) {
	for typ := range group.Events {
		if _, ok := refusalRows[typ]; !ok {
			t.Errorf("%s has no refusal row", typ)
		}
	}
	for typ, row := range refusalRows {
		t.Run(string(typ), func(t *testing.T) {
			k := newSvc(t)
			if row.setup != nil {
				row.setup(k)
			}
			before := storedEvents(t, k.s)
			err := row.refuse(k)
			if got := protocol.CodeOf(err); got != row.code {
				t.Fatalf("refusal %v, want %s", err, row.code)
			}
			if after := storedEvents(t, k.s); after != before {
				t.Fatalf("the refused command changed the log: %d events, then %d", before, after)
			}
		})
	}
}
