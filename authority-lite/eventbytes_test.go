package authoritylite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/memtree"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// checkEventBytes re-signs every event s has stored, the Organization's and
// each Group's, from its typed value as seal and org.commit build it (the
// payload decoded into its Go type and written by encoding/json): once with
// protocol.SignedEvent and once the way SignedEvent worked before it wrote
// the bytes itself (SignedValue: marshal, parse, sign the parsed document,
// canonical bytes). Both must give exactly the stored bytes, and the same
// Signature. newSvc runs it when each test ends; it reports with Errorf
// because it runs in a cleanup.
func checkEventBytes(t testing.TB, s *Service) {
	t.Helper()
	check := func(raw []byte) {
		var ev protocol.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Errorf("stored event %s: %v", raw, err)
			return
		}
		typed, err := group.Decode(ev.Type, ev.Payload)
		if err != nil {
			t.Errorf("event %s: %v", ev.EventID, err)
			return
		}
		if ev.Payload, err = json.Marshal(typed); err != nil {
			t.Errorf("event %s: %v", ev.EventID, err)
			return
		}
		stored := ev.Signature
		ev.Signature = protocol.Signature{}
		onePass, ref := ev, ev
		got, err := protocol.SignedEvent(&onePass, s.key)
		if err != nil {
			t.Errorf("event %s %s: %v", ev.Type, ev.EventID, err)
			return
		}
		ref.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: s.key.KeyID, CreatedAt: ref.OccurredAt}
		want, err := protocol.SignedValue(ref, s.key)
		if err != nil {
			t.Errorf("event %s %s: reference: %v", ev.Type, ev.EventID, err)
			return
		}
		if !bytes.Equal(got, want) || !bytes.Equal(got, raw) || onePass.Signature != stored {
			t.Errorf("event %s %s:\n stored    %s\n one-pass  %s\n reference %s", ev.Type, ev.EventID, raw, got, want)
			return
		}
		eventTypesSeen.add(ev.Type)
	}
	err := s.db.View(func(tx logstore.Tx) error {
		if err := tx.Bucket(bucketOrg).Bucket(bucketEvents).ForEach(func(_, v []byte) error { check(v); return nil }); err != nil {
			return err
		}
		groups := tx.Bucket(bucketGroups)
		return groups.ForEachBucket(func(k []byte) error {
			return groups.Bucket(k).Bucket(bucketEvents).ForEach(func(_, v []byte) error { check(v); return nil })
		})
	})
	// A test may close it first.
	if err != nil && !errors.Is(err, bolt.ErrDatabaseNotOpen) && !errors.Is(err, memtree.ErrClosed) {
		t.Errorf("read the log: %v", err)
	}
}

// eventTypesSeen collects the types checkEventBytes has checked, for
// TestEventBytesEveryType.
var eventTypesSeen = &typeSet{m: map[protocol.EventType]bool{}}

type typeSet struct {
	mu sync.Mutex
	m  map[protocol.EventType]bool
}

func (s *typeSet) add(t protocol.EventType) {
	s.mu.Lock()
	s.m[t] = true
	s.mu.Unlock()
}

func (s *typeSet) has(t protocol.EventType) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[t]
}

// TestEventBytesEveryType runs the service tests whose flows make the
// authority emit, together with the flows below, every event type of
// group.Events, and requires checkEventBytes (run as each test ends) to
// have compared events of every type.
func TestEventBytesEveryType(t *testing.T) {
	for _, f := range []func(*testing.T){
		TestServiceMissionEndToEnd, TestBudgetUpTheAncestry, TestMessageRows, TestMembershipRows, TestDelegationRows,
		TestCooperationOverrideGrant, TestGroupArchive, TestArtifactRepublishIsANewRevision, TestReconcileWithinGraceChargesOnce,
		testEveryWorkEvent, testEveryMissionEvent, TestContextPublishRows,
	} {
		name := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
		t.Run(name[strings.LastIndex(name, ".")+1:], f)
	}
	for typ := range group.Events {
		if !eventTypesSeen.has(typ) {
			t.Errorf("no %s event was compared", typ)
		}
	}
}

// testEveryWorkEvent drives WorkItems through the rows no other test
// walks in a fixed order: checkpoint, block and unblock, a dependency
// insertion, cancel and fail, a proposal, the pre-execution approval.
func testEveryWorkEvent(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	epoch, lease := w.Ownership.OwnershipEpoch, w.Lease.LeaseID
	k.ok(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: lease, Progress: progress(k.clk.Now())})
	k.ok(k.w["w1"], protocol.CmdWorkCheckpoint, &protocol.CheckpointWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: lease,
		CheckpointID: "cp-1", StateDigest: protocol.Digest([]byte("state <1>")), Progress: progress(k.clk.Now()), Reason: protocol.CheckpointPreempted})
	k.ok(k.w["w1"], protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch})
	lease = k.item("wi-1").Lease.LeaseID
	k.ok(k.w["w1"], protocol.CmdWorkBlock, &protocol.BlockWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: lease,
		CheckpointID: "cp-2", StateDigest: protocol.Digest([]byte("state 2")), Resolution: protocol.Resolution{Kind: protocol.ResolutionClarification, Detail: "which branch? \"main\" & <dev>"}})
	k.ok(k.coord, protocol.CmdWorkUnblock, &protocol.UnblockWorkPayload{WorkItemID: "wi-1", Resolution: "main \u2028 — é"})
	k.ok(k.w["w1"], protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch})
	lease = k.item("wi-1").Lease.LeaseID
	k.ok(k.w["w1"], protocol.CmdWorkSubmit, &protocol.SubmitWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: lease,
		Artifacts: protocol.List[string]{protocol.Digest([]byte("x"))}, Evidence: protocol.List[protocol.Evidence]{evidence("wi-1", "ac-1", "ac-2")}})
	k.ok(k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: "wi-1", ContractRevision: 1})

	contract := func(id string) protocol.WorkContract {
		c := testContract(id)
		c.Deadline = protocol.NewTime(k.clk.Now().Add(24 * time.Hour))
		c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
		return c
	}
	c := contract("wi-2")
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-2", MissionID: "mis-a", Contract: c})
	k.ok(k.coord, protocol.CmdDependencyInsert, &protocol.InsertDependencyPayload{WorkItemID: "wi-2", ContractRevision: 2,
		Dependencies: protocol.List[protocol.Dependency]{{WorkItemID: "wi-1", Policy: protocol.DependencyVerified}}})
	k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-2", Reason: "not needed"})
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-3", MissionID: "mis-a", Contract: contract("wi-3")})
	k.ok(k.coord, protocol.CmdWorkFail, &protocol.FailWorkPayload{WorkItemID: "wi-3", Reason: "broken", Evidence: failureEv})

	k.ok(k.w["w1"], protocol.CmdWorkPropose, &protocol.ProposeWorkPayload{ProposalID: "prop-1", MissionID: "mis-a", Summary: "add tests"})
	c = contract("wi-4")
	c.Risk.PreExecutionApproval = true
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-4", MissionID: "mis-a", Contract: c, ProposalID: "prop-1"})
	k.ok(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-4", OfferID: "off-4", Contract: c,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: basis(k.clk.Now())}}, ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Minute))})
	k.ok(k.w["w1"], protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: "wi-4", OfferID: "off-4", ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())})
	k.ok(k.alice, protocol.CmdApprovalGrantExecution, &protocol.GrantExecutionPayload{ApprovalID: "apr-x", WorkItemID: "wi-4", ContractRevision: 1, Comment: "go"})
	checkLog(t, k.s, "grp-a")
}

// testEveryMissionEvent walks a second Mission through a coordinator
// renewal, a review that asks for changes, termination and a follow-up.
func testEveryMissionEvent(t *testing.T) {
	k := newSvc(t)
	ctx := context.Background()
	do := func(p *Principal, typ protocol.CommandType, groupID string, payload any) {
		t.Helper()
		if _, err := p.Do(ctx, typ, groupID, payload); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
	do(k.alice, protocol.CmdMissionCreate, "grp-b", &protocol.CreateMissionPayload{MissionID: "mis-b", Title: "Docs <&>", Objective: "write \u2028 them", PriorityClass: protocol.PriorityHigh})
	do(k.alice, protocol.CmdMissionAssignCoordinator, "grp-b", &protocol.AssignCoordinatorPayload{MissionID: "mis-b", AgentID: "coord", LeaseDurationMs: 3600000})
	do(k.coord, protocol.CmdMissionRenewCoordinator, "grp-b", &protocol.RenewCoordinatorPayload{MissionID: "mis-b", LeaseDurationMs: 7200000})
	do(k.coord, protocol.CmdMissionSubmitForApproval, "grp-b", &protocol.SubmitForApprovalPayload{MissionID: "mis-b", Summary: "done", Artifacts: protocol.List[string]{},
		Evidence: protocol.List[protocol.Evidence]{evidence("mis-b", "ac-1")}})
	do(k.alice, protocol.CmdMissionRequestChanges, "grp-b", &protocol.RequestChangesPayload{MissionID: "mis-b", Changes: protocol.List[string]{"more examples"}, Comment: "nearly"})
	do(k.coord, protocol.CmdMissionTerminate, "grp-b", &protocol.TerminateMissionPayload{MissionID: "mis-b", Reason: "superseded"})
	do(k.alice, protocol.CmdMissionCreateFollowUp, "grp-c", &protocol.CreateFollowUpPayload{MissionID: "mis-c", FollowUpOf: "mis-b", Title: "Docs again", Objective: "o", PriorityClass: protocol.PriorityNormal})
	checkLog(t, k.s, "grp-b")
	checkLog(t, k.s, "grp-c")
}
