package offline

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// t0 is an arbitrary fixed instant: times are data, never the clock.
var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

const self = "worker-1"

func at(d time.Duration) time.Time { return t0.Add(d) }

// testKey is a deterministic key of worker-1 (seeded, so every process of
// the crash test signs identically).
func testKey(t testing.TB) protocol.PrivateKey {
	t.Helper()
	k, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorAgent, self, "k1"), rand.NewChaCha8([32]byte{1}))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// openDB opens a bbolt file; noSync for tests that do not crash. Closing
// runs bbolt's consistency check first.
func openDB(t testing.TB, path string, noSync bool) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: noSync})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkAndClose(t, db) })
	return db
}

func checkAndClose(t testing.TB, db *bolt.DB) {
	t.Helper()
	if db.Path() == "" {
		return // already closed
	}
	if err := db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() { // drain: the checker goroutine owns tx until done
			if first == nil {
				first = err
			}
		}
		return first
	}); err != nil {
		t.Errorf("bbolt check: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Error(err)
	}
}

func tempDB(t testing.TB) *bolt.DB {
	return openDB(t, filepath.Join(t.TempDir(), "worker.db"), true)
}

func openBuffer(t testing.TB, db *bolt.DB, lim Limits) *Buffer {
	t.Helper()
	b, err := OpenBuffer(db, lim)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var item = Item{GroupID: "grp-a", WorkItemID: "wi-7"}

// testLease is an active reversible lease of item granted under session 3
// that expires at t0+2m.
func testLease() Lease {
	return Lease{Item: item, AgentID: self, SessionEpoch: 3, OwnershipEpoch: 2, LeaseID: "lease-9", ExpiresAt: at(2 * time.Minute), Reversible: true}
}

func progress(n int) protocol.Progress {
	return protocol.Progress{
		Phase: fmt.Sprintf("phase-%d", n), MilestonesCompleted: protocol.List[string]{"m1"}, NextCheckpoint: "cp",
		Blockers: protocol.List[string]{}, RevisedEstimate: protocol.RevisedEstimate{CompletionAt: protocol.NewTime(at(time.Hour)), Confidence: 0.5},
		EvidenceRefs: protocol.List[string]{},
	}
}

// command builds an unsigned bufferable command about b's lease.
func command(t testing.TB, typ protocol.CommandType, b protocol.OfflineBinding, n int) *protocol.Command {
	t.Helper()
	var payload any
	switch typ {
	case protocol.CmdLeaseRenew:
		payload = protocol.RenewLeasePayload{WorkItemID: b.WorkItemID, OwnershipEpoch: b.OwnershipEpoch, LeaseID: b.HistoricalLeaseID, Progress: progress(n)}
	case protocol.CmdWorkCheckpoint:
		payload = protocol.CheckpointWorkPayload{WorkItemID: b.WorkItemID, OwnershipEpoch: b.OwnershipEpoch, LeaseID: b.HistoricalLeaseID,
			CheckpointID: fmt.Sprintf("cp-%d", n), StateDigest: protocol.Digest([]byte{byte(n)}), Progress: progress(n), Reason: protocol.CheckpointSafePoint}
	case protocol.CmdResourceUsageRecord:
		payload = protocol.RecordResourceUsagePayload{WorkItemID: b.WorkItemID, OwnershipEpoch: b.OwnershipEpoch, LeaseID: b.HistoricalLeaseID, UsageDelta: b.UsageDelta}
	case protocol.CmdMessagePost:
		payload = protocol.PostMessagePayload{MessageID: fmt.Sprintf("msg-%d", n), ConversationID: "conv-wi-7", Text: "still working"}
	default:
		payload = map[string]any{"workItemId": b.WorkItemID}
	}
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return &protocol.Command{
		ActionID: fmt.Sprintf("act-%s-%d", b.WorkItemID, n), ProtocolVersion: protocol.Version,
		Actor: protocol.Actor{Kind: protocol.ActorAgent, ID: b.AgentID}, Type: typ, GroupID: b.GroupID,
		SessionEpoch: protocol.Uint64(b.OriginalSessionEpoch), MembershipEpoch: protocol.Uint64(1),
		CorrelationID: "mis-a", Payload: p,
	}
}

// binding is a valid binding of testLease buffered at t0+d, offline since t0.
func binding(d time.Duration, usage protocol.Usage) protocol.OfflineBinding {
	l := testLease()
	return protocol.OfflineBinding{
		AgentID: self, GroupID: l.GroupID, WorkItemID: l.WorkItemID, OriginalSessionEpoch: l.SessionEpoch,
		OwnershipEpoch: l.OwnershipEpoch, HistoricalLeaseID: l.LeaseID, DisconnectedAt: protocol.NewTime(t0),
		BufferedAt: protocol.NewTime(at(d)), GraceDeadline: protocol.NewTime(l.ExpiresAt.Add(DefaultGrace)),
		HistoricalLeaseExpiresAt: protocol.NewTime(l.ExpiresAt), UsageDelta: usage,
	}
}

// signedBuffered returns the n-th buffered lease renewal, signed offline.
func signedBuffered(t testing.TB, key protocol.PrivateKey, n int) []byte {
	t.Helper()
	b := binding(time.Duration(n)*time.Millisecond, protocol.Usage{Tokens: uint64(n), ComputeSeconds: 0.5})
	raw, err := SignBuffered(command(t, protocol.CmdLeaseRenew, b, n), b, key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func mustAppend(t testing.TB, buf *Buffer, raw []byte) Entry {
	t.Helper()
	e, err := buf.Append(raw)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func pending(t testing.TB, buf *Buffer) []Entry {
	t.Helper()
	es, err := buf.Pending()
	if err != nil {
		t.Fatal(err)
	}
	return es
}
