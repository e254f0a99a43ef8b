package queue

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

var authorityKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

// signedSnapshot returns a snapshot document signed by authorityKey and its
// reference.
func signedSnapshot(t *testing.T, snap protocol.GroupSnapshot) ([]byte, protocol.SnapshotRef) {
	t.Helper()
	snap.Signature = protocol.Signature{Alg: "Ed25519", KeyID: "authority-1#k1", CreatedAt: snap.CreatedAt}
	unsigned, err := protocol.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	snap.Signature.Value = base64.RawURLEncoding.EncodeToString(ed25519.Sign(authorityKey, unsigned))
	doc, err := protocol.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	return doc, protocol.SnapshotRef{SnapshotID: snap.SnapshotID, GroupID: snap.GroupID, Sequence: snap.Sequence, Digest: protocol.Digest(doc), URI: "https://authority.example/snapshots/" + snap.SnapshotID}
}

// verifyWith checks the Ed25519 signature of a parsed document, the way
// protocol.Verify does for one known key.
func verifyWith(pub ed25519.PublicKey) func(map[string]any) error {
	return func(doc map[string]any) error {
		sig, _ := doc["signature"].(map[string]any)
		if sig == nil {
			return errors.New("no signature")
		}
		value, _ := sig["value"].(string)
		raw, err := base64.RawURLEncoding.DecodeString(value)
		if err != nil {
			return err
		}
		stripped := make(map[string]any, len(sig))
		for k, v := range sig {
			if k != "value" {
				stripped[k] = v
			}
		}
		unsigned := make(map[string]any, len(doc))
		for k, v := range doc {
			unsigned[k] = v
		}
		unsigned["signature"] = stripped
		b, err := protocol.Canonical(unsigned)
		if err != nil {
			return err
		}
		if !ed25519.Verify(pub, b, raw) {
			return protocol.Errorf(protocol.CodeAuthInvalidSignature, "bad snapshot signature")
		}
		return nil
	}
}

// snapshotAt describes the Group after the first n events of a stream the
// way the authority would: wi-1 queued for self at epoch 2, wi-2 open and
// depending on wi-1, wi-3 verified.
func snapshotFixture(seq uint64) protocol.GroupSnapshot {
	gated := testContract(1, protocol.UrgencyHigh, true)
	dep := testContract(1, protocol.UrgencyLow, false, "wi-1")
	at := protocol.NewTime(t0.Add(time.Minute))
	return protocol.GroupSnapshot{
		SnapshotID: "snap-1", GroupID: "g", Sequence: seq, LastEventID: "evt-g-x",
		CreatedAt: at, CreatedBy: "authority-1",
		Mission: protocol.Mission{MissionID: "mis-g", GroupID: "g", Title: "t", Objective: "o", State: protocol.MissionActive, Owner: protocol.Actor{Kind: protocol.ActorHuman, ID: "human-1"}, PriorityClass: protocol.PriorityHigh, CreatedAt: at, Revision: 3},
		Memberships: []protocol.Membership{
			{GroupID: "g", Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: self}, Roles: []protocol.Role{"worker"}, MembershipEpoch: 3, State: protocol.MembershipActive, JoinedAt: at, Revision: 3},
			{GroupID: "g", Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: "worker-2"}, Roles: []protocol.Role{"worker"}, MembershipEpoch: 2, State: protocol.MembershipEnded, JoinedAt: at, Revision: 2},
		},
		WorkItems: []protocol.WorkItem{
			{WorkItemID: "wi-1", MissionID: "mis-g", GroupID: "g", State: protocol.WorkQueued, Contract: gated, Revision: 4,
				Ownership:  &protocol.OwnershipGrant{WorkItemID: "wi-1", OwnerAgentID: self, OwnershipEpoch: 2, StartDeadline: protocol.NewTime(t0.Add(time.Hour))},
				Checkpoint: &protocol.CheckpointRef{CheckpointID: "cp-1", StateDigest: protocol.Digest([]byte("s")), At: at},
				Attempts:   1, CreatedAt: at, UpdatedAt: at},
			{WorkItemID: "wi-2", MissionID: "mis-g", GroupID: "g", State: protocol.WorkOpen, Contract: dep, Revision: 1, CreatedAt: at, UpdatedAt: at},
			{WorkItemID: "wi-3", MissionID: "mis-g", GroupID: "g", State: protocol.WorkVerified, Contract: dep, Revision: 7, CreatedAt: at, UpdatedAt: at},
		},
		Approvals: []protocol.Approval{{ApprovalID: "apr-1", Kind: protocol.ApprovalExecution, MissionID: "mis-g", GroupID: "g", WorkItemID: "wi-1",
			ContractRevision: protocol.Uint64(1), Approver: protocol.Actor{Kind: protocol.ActorHuman, ID: "human-1"}, Decision: protocol.DecisionApproved, DecidedAt: at}},
		Artifacts:       []string{},
		PolicyLogDigest: protocol.Digest([]byte("policy")),
	}
}

func TestRestoreSnapshotCursorTooOld(t *testing.T) {
	// The online log starts after sequence 40; the worker's cursor (0) is
	// too old, so it restores the snapshot and continues from 40.
	later := newStream("g")
	later.seq = 40
	later.revs["workItem/wi-1"] = 4
	later.grants["wi-1"] = &protocol.OwnershipGrant{WorkItemID: "wi-1", OwnerAgentID: self, OwnershipEpoch: 2, StartDeadline: protocol.NewTime(t0.Add(time.Hour))}
	later.contracts["wi-1"] = testContract(1, protocol.UrgencyHigh, true)
	later.started("wi-1", self, 2, "lease-1")
	later.submitted("wi-1")
	later.resultAccepted("wi-1")

	doc, ref := signedSnapshot(t, snapshotFixture(40))
	dir := t.TempDir()
	s := openTest(t, dir, fast)
	// An event past the snapshot arrived before the restore: it is held,
	// then applied by the restore.
	if res := mustApply(t, s, later.evs[0]); len(res.Buffered) != 1 {
		t.Fatalf("first live event: %+v", res)
	}
	res, err := s.RestoreSnapshot(ref, doc, verifyWith(authorityKey.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if got := seqs(res.Applied); !reflect.DeepEqual(got, []uint64{41}) || s.Cursor("g") != 41 {
		t.Fatalf("restore applied %v, cursor %d", got, s.Cursor("g"))
	}
	e, _ := s.Item("g", "wi-1")
	if e.State != protocol.WorkActive || e.Owner != self || e.OwnershipEpoch != 2 || !e.RiskGatePassed() || e.Checkpoint == nil || e.Lease.LeaseID != "lease-1" {
		t.Fatalf("wi-1 = %+v", e)
	}
	if e, _ := s.Item("g", "wi-2"); e.Dependencies[0].State != protocol.WorkActive {
		t.Fatalf("wi-2 = %+v", e)
	}
	if m, _ := s.Mission("g"); m.PriorityClass != protocol.PriorityHigh || m.State != protocol.MissionActive {
		t.Fatalf("mission = %+v", m)
	}
	// Memberships come from the snapshot: the events that set them are
	// compacted away, and commands must carry the epoch.
	me := protocol.Actor{Kind: protocol.ActorAgent, ID: self}
	if m, ok := s.Membership("g", me); !ok || m.Epoch != 3 || !m.Active() {
		t.Fatalf("own membership after restore = %+v %v", m, ok)
	}
	if m, ok := s.Membership("g", protocol.Actor{Kind: protocol.ActorAgent, ID: "worker-2"}); !ok || m.Active() {
		t.Fatalf("ended membership after restore = %+v %v", m, ok)
	}
	if len(res.Members) != 2 {
		t.Fatalf("restore reported memberships %+v", res.Members)
	}
	if c, err := s.Contract("g", "wi-2"); err != nil || c.Urgency != protocol.UrgencyLow || len(c.Dependencies) != 1 {
		t.Fatalf("contract from the snapshot: %+v %v", c, err)
	}
	// Replay continues after the snapshot's sequence; older events are
	// duplicates.
	old := newStream("g")
	old.missionCreated()
	res = mustApply(t, s, append([]Incoming{old.evs[0]}, later.evs...)...)
	if len(res.Duplicates) != 2 || !reflect.DeepEqual(seqs(res.Applied), []uint64{42, 43}) {
		t.Fatalf("after restore: %+v", res)
	}
	if e, _ := s.Item("g", "wi-2"); !e.DependenciesSatisfied() {
		t.Fatalf("wi-2 = %+v", e)
	}
	before := dumpProjection(t, s.db, "g")
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if got := dumpProjection(t, s.db, "g"); got != before {
		t.Fatalf("rebuild over the snapshot differs:\n%s\nwant\n%s", got, before)
	}
	// Restoring the same snapshot again is refused: it is behind the cursor.
	if _, err := s.RestoreSnapshot(ref, doc, verifyWith(authorityKey.Public().(ed25519.PublicKey))); protocol.CodeOf(err) != protocol.CodeProtocolViolation {
		t.Fatalf("stale restore: %v", err)
	}
	items := s.Items("g")
	closeChecked(t, s)
	s = openTest(t, dir, fast)
	if !reflect.DeepEqual(s.Items("g"), items) || s.Cursor("g") != 43 || dumpProjection(t, s.db, "g") != before {
		t.Fatalf("restart after restore changed the store")
	}
	if m, ok := s.Membership("g", me); !ok || m.Epoch != 3 {
		t.Fatalf("own membership after restart = %+v %v", m, ok)
	}
}

func TestRestoreSnapshotRefusesBadInput(t *testing.T) {
	doc, ref := signedSnapshot(t, snapshotFixture(40))
	good := verifyWith(authorityKey.Public().(ed25519.PublicKey))
	other := ed25519.NewKeyFromSeed(append(make([]byte, 31), 1))
	wrongGroup := snapshotFixture(40)
	wrongGroup.WorkItems[1].GroupID = "elsewhere"
	wgDoc, wgRef := signedSnapshot(t, wrongGroup)
	tests := []struct {
		name   string
		ref    protocol.SnapshotRef
		doc    []byte
		verify func(map[string]any) error
		want   protocol.Code
	}{
		{"digest mismatch", withDigest(ref, protocol.Digest([]byte("x"))), doc, good, protocol.CodeProtocolViolation},
		{"signature by another key", ref, doc, verifyWith(other.Public().(ed25519.PublicKey)), protocol.CodeAuthInvalidSignature},
		{"verifier error without a code", ref, doc, func(map[string]any) error { return errors.New("key unknown") }, protocol.CodeAuthInvalidSignature},
		{"no verifier", ref, doc, nil, protocol.CodeInternalError},
		{"reference names another sequence", withSeq(ref, 41), doc, good, protocol.CodeProtocolViolation},
		{"not JSON", ref, []byte("{"), good, protocol.CodeProtocolViolation},
		{"duplicate members", ref, []byte(`{"a":1,"a":2}`), good, protocol.CodeProtocolViolation},
		{"not an object", ref, []byte(`[]`), good, protocol.CodeSchemaValidationFailed},
		{"item of another group", wgRef, wgDoc, good, protocol.CodeSchemaValidationFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newStream("g")
			st.missionCreated()
			s := openTest(t, t.TempDir(), fast)
			mustApply(t, s, st.evs...)
			before := dumpProjection(t, s.db, "g") + dumpInbox(t, s.db, "g")
			_, err := s.RestoreSnapshot(tc.ref, tc.doc, tc.verify)
			if got := protocol.CodeOf(err); err == nil || got != tc.want {
				t.Fatalf("err = %v (%s), want %s", err, got, tc.want)
			}
			if after := dumpProjection(t, s.db, "g") + dumpInbox(t, s.db, "g"); after != before || s.Cursor("g") != 1 {
				t.Fatalf("a refused snapshot changed the store")
			}
		})
	}
}

func withDigest(r protocol.SnapshotRef, d string) protocol.SnapshotRef { r.Digest = d; return r }
func withSeq(r protocol.SnapshotRef, q uint64) protocol.SnapshotRef    { r.Sequence = q; return r }

func TestSnapshotFixtureIsStrictJSON(t *testing.T) {
	doc, _ := signedSnapshot(t, snapshotFixture(1))
	var snap protocol.GroupSnapshot
	if err := protocol.DecodeExact(doc, &snap, protocol.CodeSchemaValidationFailed); err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(snap); err != nil {
		t.Fatal(err)
	}
}
