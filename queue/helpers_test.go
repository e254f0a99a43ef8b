package queue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// t0 is an arbitrary fixed instant: event times are data, never the clock.
var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

const self = "worker-1"

// stream builds a valid event stream of one Group, as the authority would.
type stream struct {
	group string
	seq   uint64
	revs  map[string]uint64
	evs   []Incoming
	// What the authority's payloads repeat: each item's contract, grant
	// and lease.
	contracts map[string]protocol.WorkContract
	grants    map[string]*protocol.OwnershipGrant
	leases    map[string]*protocol.ExecutionLease
}

func newStream(group string) *stream {
	return &stream{group: group, revs: make(map[string]uint64), contracts: map[string]protocol.WorkContract{},
		grants: map[string]*protocol.OwnershipGrant{}, leases: map[string]*protocol.ExecutionLease{}}
}

// add appends one event and returns it.
func (s *stream) add(typ protocol.EventType, aggKind protocol.AggregateKind, aggID string, actor string, payload any) Incoming {
	s.seq++
	key := string(aggKind) + "/" + aggID
	s.revs[key]++
	p, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	seq, rev := s.seq, s.revs[key]
	ev := protocol.Event{
		EventID: fmt.Sprintf("evt-%s-%d", s.group, seq), GroupID: s.group, Sequence: &seq,
		Aggregate: &protocol.Aggregate{Kind: aggKind, ID: aggID}, Revision: &rev,
		Type: typ, Actor: protocol.Actor{Kind: protocol.ActorAgent, ID: actor},
		CausationID: fmt.Sprintf("act-%s-%d", s.group, seq), CorrelationID: "mis-" + s.group,
		OccurredAt: protocol.NewTime(t0.Add(time.Duration(seq) * time.Second)), AcceptedBy: "authority-1",
		Payload:   p,
		Signature: protocol.Signature{Alg: "Ed25519", KeyID: "authority-1#k1", CreatedAt: protocol.NewTime(t0), Value: strings.Repeat("A", 86)},
	}
	in := mustIncoming(&ev)
	s.evs = append(s.evs, in)
	return in
}

func mustIncoming(ev *protocol.Event) Incoming {
	raw, err := protocol.Marshal(ev)
	if err != nil {
		panic(err)
	}
	in, err := Decode(raw)
	if err != nil {
		panic(err)
	}
	return in
}

func testContract(rev uint64, urgency protocol.Urgency, approval bool, deps ...string) protocol.WorkContract {
	c := protocol.WorkContract{
		ContractID: "wc-1", Revision: rev, Goal: "implement the thing",
		RequiredOutputs:      []protocol.OutputSpec{{Name: "patch", MediaType: "text/x-diff"}},
		AcceptanceCriteria:   []protocol.AcceptanceCriterion{{ID: "ac-1", Description: "tests pass", EvidenceRequired: []string{"test-report"}}},
		Inputs:               []protocol.InputRef{},
		AllowedTools:         []string{"git"},
		AllowedData:          []string{"repo:a"},
		AllowedOperations:    []string{"read", "write"},
		ResourceLimits:       protocol.ResourceLimits{CPU: protocol.Float64(1), MemoryMiB: protocol.Uint64(512)},
		RequiredCapabilities: []protocol.Capability{{ID: "code.implement", Version: "1.x"}},
		Deadline:             protocol.NewTime(t0.Add(24 * time.Hour)),
		Urgency:              urgency,
		BusinessImpact:       protocol.ImpactMedium,
		Budgets:              protocol.Budgets{ToolCalls: protocol.Uint64(100)},
		RetryPolicy:          protocol.RetryPolicy{MaxAttempts: 3, Backoff: protocol.Backoff{InitialMs: 500, MaxMs: 30000, Multiplier: 2}, AttemptTimeoutMs: 600000, CostLimit: 5},
		Risk:                 protocol.Risk{Class: protocol.RiskLow, PreExecutionApproval: approval},
	}
	for _, d := range deps {
		c.Dependencies = append(c.Dependencies, protocol.Dependency{WorkItemID: d, Policy: protocol.DependencyVerified})
	}
	return c
}

type obj = map[string]any

func (s *stream) missionCreated() { s.missionCreatedWith(protocol.PriorityHigh) }

func (s *stream) missionCreatedWith(pc protocol.PriorityClass) {
	id := "mis-" + s.group
	m := &protocol.Mission{MissionID: id, GroupID: s.group, Title: "t", Objective: "o", State: protocol.MissionActive,
		Owner: protocol.Actor{Kind: protocol.ActorHuman, ID: "human-1"}, PriorityClass: pc, CreatedAt: protocol.NewTime(t0), Revision: 1}
	s.add(protocol.EvtMissionCreated, protocol.AggregateMission, id, "human-1",
		group.MissionCreated{MissionRef: group.MissionRef{MissionID: id, State: protocol.MissionActive}, Mission: m})
}

// missionClosed is mission.cancelled (to cancelled) or mission.terminated.
func (s *stream) missionClosed(typ protocol.EventType, to protocol.MissionState) {
	id := "mis-" + s.group
	s.add(typ, protocol.AggregateMission, id, "human-1", group.MissionClosed{MissionRef: group.MissionRef{MissionID: id, State: to}, Reason: "r"})
}

func (s *stream) authorized(wi string, c protocol.WorkContract) {
	s.contracts[wi] = c
	s.add(protocol.EvtWorkAuthorized, protocol.AggregateWorkItem, wi, "coord-1",
		group.Authorized{WorkRef: ref(wi, protocol.WorkOpen), MissionID: "mis-" + s.group, Contract: &c, ContractRevision: c.Revision})
}

func ref(wi string, st protocol.WorkItemState) group.WorkRef {
	return group.WorkRef{WorkItemID: wi, State: st}
}

// offered is work.offer.created as the authority writes it (the one
// payload type), expiring an hour after t0; c nil repeats the item's
// contract.
func (s *stream) offered(wi string, c *protocol.WorkContract, candidates ...string) {
	if c == nil {
		cur := s.contracts[wi]
		c = &cur
	}
	s.contracts[wi] = *c
	var fenced *uint64
	if g := s.grants[wi]; g != nil {
		fenced = protocol.Uint64(g.OwnershipEpoch)
	}
	delete(s.grants, wi)
	delete(s.leases, wi)
	exp := protocol.NewTime(t0.Add(time.Hour))
	p := group.OfferCreated{WorkRef: ref(wi, protocol.WorkOffered), OfferID: "off-" + wi,
		Contract: c, ContractRevision: c.Revision, OfferExpiresAt: &exp, FencedOwnershipEpoch: fenced}
	for _, a := range candidates {
		p.Candidates = append(p.Candidates, protocol.OfferCandidate{AgentID: a, SelectionBasis: protocol.SelectionBasis{AuthorizationEligible: true}})
	}
	s.add(protocol.EvtWorkOfferCreated, protocol.AggregateWorkItem, wi, "coord-1", p)
}

func (s *stream) accepted(wi, owner string, epoch uint64, contractRev uint64) {
	g := &protocol.OwnershipGrant{WorkItemID: wi, OwnerAgentID: owner, OwnershipEpoch: epoch, StartDeadline: protocol.NewTime(t0.Add(2 * time.Hour))}
	s.grants[wi] = g
	s.add(protocol.EvtWorkOfferAccepted, protocol.AggregateWorkItem, wi, owner, group.OfferAccepted{
		WorkRef: ref(wi, protocol.WorkQueued), OfferID: "off-" + wi, ContractRevision: contractRev, Ownership: g})
}

func (s *stream) started(wi, owner string, epoch uint64, lease string) {
	l := &protocol.ExecutionLease{LeaseID: lease, AgentID: owner, SessionEpoch: 1, WorkItemID: wi, OwnershipEpoch: epoch,
		StartedAt: protocol.NewTime(t0), Renewals: []protocol.Time{}, ExpiresAt: protocol.NewTime(t0.Add(10 * time.Minute))}
	s.leases[wi] = l
	s.add(protocol.EvtWorkStarted, protocol.AggregateWorkItem, wi, owner, group.Started{WorkRef: ref(wi, protocol.WorkActive), Lease: l, Ownership: s.grants[wi]})
}

// renewed is a lease renewal (work.progressed with the lease).
func (s *stream) renewed(wi string, expires time.Time) {
	l := *s.leases[wi]
	l.ExpiresAt = protocol.NewTime(expires)
	s.leases[wi] = &l
	s.add(protocol.EvtWorkProgressed, protocol.AggregateWorkItem, wi, l.AgentID, group.Progressed{WorkRef: ref(wi, protocol.WorkActive), LeaseID: l.LeaseID, Lease: &l})
}

// progressed is plain progress: no scheduling input changes.
func (s *stream) progressed(wi string) {
	s.add(protocol.EvtWorkProgressed, protocol.AggregateWorkItem, wi, self, group.Progressed{WorkRef: ref(wi, protocol.WorkActive),
		LeaseID: s.leases[wi].LeaseID, Progress: &protocol.Progress{Phase: "x"}})
}

func (s *stream) checkpointed(wi, cp string) {
	l := s.leases[wi]
	delete(s.leases, wi)
	s.add(protocol.EvtWorkCheckpointed, protocol.AggregateWorkItem, wi, l.AgentID, group.Checkpointed{WorkRef: ref(wi, protocol.WorkQueued),
		LeaseID: l.LeaseID, Checkpoint: &protocol.CheckpointRef{CheckpointID: cp, StateDigest: protocol.Digest([]byte(cp)), At: protocol.NewTime(t0)},
		CheckpointReason: protocol.CheckpointPreempted, Ownership: s.grants[wi]})
}

func (s *stream) blocked(wi, cp string, r protocol.Resolution) {
	l := s.leases[wi]
	delete(s.leases, wi)
	until := protocol.NewTime(t0.Add(time.Hour))
	s.add(protocol.EvtWorkBlocked, protocol.AggregateWorkItem, wi, l.AgentID, group.Blocked{WorkRef: ref(wi, protocol.WorkBlocked),
		LeaseID: l.LeaseID, Checkpoint: &protocol.CheckpointRef{CheckpointID: cp, StateDigest: protocol.Digest([]byte(cp)), At: protocol.NewTime(t0)},
		Blocker: &r, Ownership: s.grants[wi], BlockedUntil: &until})
}

// unblocked returns the item to queued under its owner, or to open when
// the owner's hold lapsed (fenced).
func (s *stream) unblocked(wi string, fenced bool) {
	p := group.Unblocked{WorkRef: ref(wi, protocol.WorkQueued), Resolution: "answered", Ownership: s.grants[wi]}
	if fenced {
		p.WorkRef.State, p.Ownership = protocol.WorkOpen, nil
		p.FencedOwnershipEpoch = protocol.Uint64(s.grants[wi].OwnershipEpoch)
		delete(s.grants, wi)
	}
	s.add(protocol.EvtWorkUnblocked, protocol.AggregateWorkItem, wi, "coord-1", p)
}

func (s *stream) submitted(wi string) {
	l := s.leases[wi]
	delete(s.leases, wi)
	s.add(protocol.EvtWorkSubmitted, protocol.AggregateWorkItem, wi, l.AgentID, group.Submitted{WorkRef: ref(wi, protocol.WorkSubmitted),
		LeaseID: l.LeaseID, Ownership: s.grants[wi], Evidence: []protocol.Evidence{}})
}

func (s *stream) resultAccepted(wi string) {
	s.add(protocol.EvtWorkResultAccepted, protocol.AggregateWorkItem, wi, "coord-1", group.ResultAccepted{WorkRef: ref(wi, protocol.WorkVerified),
		ContractRevision: s.contracts[wi].Revision})
}

func (s *stream) failed(wi string) {
	delete(s.grants, wi)
	delete(s.leases, wi)
	s.add(protocol.EvtWorkFailed, protocol.AggregateWorkItem, wi, "coord-1", group.Failed{WorkRef: ref(wi, protocol.WorkFailed), Reason: "broke", Evidence: []protocol.Evidence{}})
}

func (s *stream) cancelled(wi string) {
	delete(s.grants, wi)
	delete(s.leases, wi)
	s.add(protocol.EvtWorkCancelled, protocol.AggregateWorkItem, wi, "coord-1", group.Cancelled{WorkRef: ref(wi, protocol.WorkCancelled), Reason: "not needed"})
}

// approved is approval.execution.granted for contract revision rev,
// expiring at exp (zero: no expiry).
func (s *stream) approved(wi string, rev uint64, exp time.Time) {
	a := &protocol.Approval{ApprovalID: "apr-" + wi, Kind: protocol.ApprovalExecution, MissionID: "mis-" + s.group, GroupID: s.group,
		WorkItemID: wi, ContractRevision: protocol.Uint64(rev), Approver: protocol.Actor{Kind: protocol.ActorHuman, ID: "human-1"},
		Decision: protocol.DecisionApproved, DecidedAt: protocol.NewTime(t0)}
	if !exp.IsZero() {
		e := protocol.NewTime(exp)
		a.ExpiresAt = &e
	}
	s.add(protocol.EvtApprovalExecutionGranted, protocol.AggregateWorkItem, wi, "human-1", group.ExecutionGranted{WorkRef: ref(wi, protocol.WorkQueued), Approval: a})
}

// revised is work.contract.revised to c (deps: the inserted dependencies).
func (s *stream) revised(wi string, c protocol.WorkContract, deps ...protocol.Dependency) {
	prev := s.contracts[wi].Revision
	s.contracts[wi] = c
	st := protocol.WorkOpen
	if s.grants[wi] != nil {
		st = protocol.WorkQueued
	}
	s.add(protocol.EvtWorkContractRevised, protocol.AggregateWorkItem, wi, "coord-1", group.ContractRevised{WorkRef: ref(wi, st),
		Contract: &c, ContractRevision: c.Revision, PreviousRevision: prev, Dependencies: deps})
}

// member records principal's membership as the authority does: the whole
// record in the payload.
func (s *stream) member(typ protocol.EventType, agent string, epoch uint64, state protocol.MembershipState) {
	p := protocol.Actor{Kind: protocol.ActorAgent, ID: agent}
	s.add(typ, protocol.AggregateMembership, "mem-"+agent, "human-1", protocol.Membership{
		GroupID: s.group, Principal: p, Roles: []protocol.Role{"worker"}, MembershipEpoch: epoch, State: state,
		JoinedAt: protocol.NewTime(t0), Revision: epoch})
}

func (s *stream) message(text string) {
	s.add(protocol.EvtMessagePosted, protocol.AggregateMessage, fmt.Sprintf("msg-%d", s.seq+1), "coord-1",
		obj{"messageId": fmt.Sprintf("msg-%d", s.seq+1), "conversationId": "conv-1", "text": text})
}

// randomStream builds a Group stream with n WorkItems, each following a
// random legal path through the spec 10.2 table, interleaved with messages.
func randomStream(group string, n int, r *rand.Rand) *stream {
	s := newStream(group)
	s.missionCreated()
	s.member(protocol.EvtMembershipChanged, self, 1, protocol.MembershipActive)
	s.member(protocol.EvtMembershipChanged, "worker-2", 1, protocol.MembershipActive)
	for i := 1; i <= n; i++ {
		if r.IntN(10) == 0 {
			s.member(protocol.EvtMembershipChanged, self, s.revs["membership/mem-"+self]+1, protocol.MembershipActive)
		}
		wi := fmt.Sprintf("wi-%d", i)
		var deps []string
		if i > 1 && r.IntN(3) == 0 {
			deps = append(deps, fmt.Sprintf("wi-%d", 1+r.IntN(i-1)))
		}
		approval := r.IntN(4) == 0
		c := testContract(1, []protocol.Urgency{"low", "normal", "high", "critical"}[r.IntN(4)], approval, deps...)
		s.authorized(wi, c)
		owner := []string{self, "worker-2"}[r.IntN(2)]
		s.offered(wi, nil, self, "worker-2")
		if r.IntN(8) == 0 {
			s.cancelled(wi)
			continue
		}
		s.accepted(wi, owner, 1, 1)
		if approval {
			s.approved(wi, 1, time.Time{})
		}
		if r.IntN(3) == 0 {
			s.message("status?")
		}
		if r.IntN(5) == 0 {
			continue // stays queued
		}
		s.started(wi, owner, 1, "lease-"+wi+"-1")
		s.renewed(wi, t0.Add(20*time.Minute))
		switch r.IntN(4) {
		case 0:
			s.checkpointed(wi, "cp-"+wi)
			continue
		case 1:
			s.failed(wi)
			continue
		}
		s.submitted(wi)
		if r.IntN(2) == 0 {
			s.resultAccepted(wi)
		}
	}
	return s
}

// tb is the part of testing.TB that rapid.T also has.
type tb interface {
	Helper()
	Fatal(args ...any)
}

// openTest opens a store in dir that checks the file's integrity with
// tx.Check and closes it when the test ends (like bbolt's btesting).
func openTest(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeChecked(t, s) })
	return s
}

func closeChecked(t testing.TB, s *Store) {
	t.Helper()
	if s.isClosed() {
		return
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Errorf("bbolt check: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// dumpProjection renders a Group's stored projection (queue bucket and
// mission key) byte for byte.
func dumpProjection(t tb, db *bolt.DB, group string) string {
	t.Helper()
	var b bytes.Buffer
	err := db.View(func(tx *bolt.Tx) error {
		gb := tx.Bucket(bktGroups).Bucket([]byte(group))
		if gb == nil {
			return fmt.Errorf("no group %s", group)
		}
		fmt.Fprintf(&b, "mission %s\n", gb.Bucket(bktMeta).Get(keyMission))
		fmt.Fprintf(&b, "members %s\n", gb.Bucket(bktMeta).Get(keyMembers))
		fmt.Fprintf(&b, "cursor %d\n", getU64(gb.Bucket(bktMeta).Get(keyCursor)))
		return gb.Bucket(bktQueue).ForEach(func(k, v []byte) error {
			fmt.Fprintf(&b, "%s %s\n", k, v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// dumpInbox renders a Group's inbox.
func dumpInbox(t tb, db *bolt.DB, group string) string {
	t.Helper()
	var b bytes.Buffer
	err := db.View(func(tx *bolt.Tx) error {
		gb := tx.Bucket(bktGroups).Bucket([]byte(group))
		if gb == nil {
			return nil
		}
		return gb.Bucket(bktInbox).ForEach(func(k, v []byte) error {
			fmt.Fprintf(&b, "%d %s\n", getU64(k), v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func mustApply(t tb, s *Store, batch ...Incoming) Result {
	t.Helper()
	res, err := s.Apply(batch)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func seqs(refs []Ref) []uint64 {
	out := make([]uint64, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.Sequence)
	}
	return out
}
