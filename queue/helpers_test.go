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
}

func newStream(group string) *stream {
	return &stream{group: group, revs: make(map[string]uint64)}
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

func (s *stream) missionCreated() {
	s.add(protocol.EvtMissionCreated, protocol.AggregateMission, "mis-"+s.group, "human-1",
		obj{"missionId": "mis-" + s.group, "title": "t", "objective": "o", "priorityClass": "high"})
}

func (s *stream) authorized(wi string, c protocol.WorkContract) {
	s.add(protocol.EvtWorkAuthorized, protocol.AggregateWorkItem, wi, "coord-1",
		obj{"workItemId": wi, "missionId": "mis-" + s.group, "contract": c})
}

// offered is work.offer.created as the authority writes it (the one
// payload type), expiring an hour after t0.
func (s *stream) offered(wi string, c *protocol.WorkContract, candidates ...string) {
	exp := protocol.NewTime(t0.Add(time.Hour))
	p := group.OfferCreated{WorkRef: group.WorkRef{WorkItemID: wi, State: protocol.WorkOffered}, OfferID: "off-" + wi,
		Contract: c, OfferExpiresAt: &exp}
	if c != nil {
		p.ContractRevision = c.Revision
	}
	for _, a := range candidates {
		p.Candidates = append(p.Candidates, protocol.OfferCandidate{AgentID: a, SelectionBasis: protocol.SelectionBasis{AuthorizationEligible: true}})
	}
	s.add(protocol.EvtWorkOfferCreated, protocol.AggregateWorkItem, wi, "coord-1", p)
}

func (s *stream) accepted(wi, owner string, epoch uint64, contractRev uint64) {
	s.add(protocol.EvtWorkOfferAccepted, protocol.AggregateWorkItem, wi, owner, obj{
		"workItemId": wi, "offerId": "off-" + wi, "contractRevision": contractRev,
		"ownership": protocol.OwnershipGrant{WorkItemID: wi, OwnerAgentID: owner, OwnershipEpoch: epoch, StartDeadline: protocol.NewTime(t0.Add(2 * time.Hour))},
	})
}

func (s *stream) started(wi, owner string, epoch uint64, lease string) {
	s.add(protocol.EvtWorkStarted, protocol.AggregateWorkItem, wi, owner, obj{
		"workItemId": wi, "ownershipEpoch": epoch,
		"lease": protocol.ExecutionLease{LeaseID: lease, AgentID: owner, SessionEpoch: 1, WorkItemID: wi, OwnershipEpoch: epoch,
			StartedAt: protocol.NewTime(t0), Renewals: []protocol.Time{}, ExpiresAt: protocol.NewTime(t0.Add(10 * time.Minute))},
	})
}

func (s *stream) simple(typ protocol.EventType, wi, actor string, extra obj) {
	p := obj{"workItemId": wi}
	for k, v := range extra {
		p[k] = v
	}
	s.add(typ, protocol.AggregateWorkItem, wi, actor, p)
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
			s.simple(protocol.EvtWorkCancelled, wi, "coord-1", obj{"reason": "not needed"})
			continue
		}
		s.accepted(wi, owner, 1, 1)
		if approval {
			s.add(protocol.EvtApprovalExecutionGranted, protocol.AggregateApproval, "apr-"+wi, "human-1",
				obj{"approvalId": "apr-" + wi, "workItemId": wi, "contractRevision": 1})
		}
		if r.IntN(3) == 0 {
			s.message("status?")
		}
		if r.IntN(5) == 0 {
			continue // stays queued
		}
		s.started(wi, owner, 1, "lease-"+wi+"-1")
		s.simple(protocol.EvtWorkProgressed, wi, owner, obj{"leaseId": "lease-" + wi + "-1", "ownershipEpoch": 1,
			"lease": obj{"leaseId": "lease-" + wi + "-1", "expiresAt": protocol.NewTime(t0.Add(20 * time.Minute))}})
		switch r.IntN(4) {
		case 0:
			s.simple(protocol.EvtWorkCheckpointed, wi, owner, obj{"leaseId": "lease-" + wi + "-1", "ownershipEpoch": 1,
				"checkpointId": "cp-" + wi, "stateDigest": protocol.Digest([]byte(wi)), "reason": "preempted"})
			continue
		case 1:
			s.simple(protocol.EvtWorkFailed, wi, owner, obj{"reason": "broke"})
			continue
		}
		s.simple(protocol.EvtWorkSubmitted, wi, owner, obj{"leaseId": "lease-" + wi + "-1", "ownershipEpoch": 1})
		if r.IntN(2) == 0 {
			s.simple(protocol.EvtWorkResultAccepted, wi, "coord-1", obj{"contractRevision": 1})
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
