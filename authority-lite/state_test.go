package authoritylite

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// crashCopy returns a data directory holding s's store as a crash (kill
// -9, power loss) would leave it: every committed transaction and nothing
// Close still writes. The files beside the store (artifacts, snapshots,
// key) are copied as they are.
func crashCopy(t testing.TB, s *Service) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "crashed")
	if err := os.CopyFS(dir, os.DirFS(s.cfg.Dir)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, LogFile)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := s.db.bolt.View(func(tx *bolt.Tx) error { return tx.CopyFile(path, 0o600) }); err != nil {
		t.Fatal(err)
	}
	return dir
}

// crash replaces k.s by a Service opened on a crash copy of its store and
// requires it to hold exactly the state k.s held.
func (k *svc) crash() {
	k.t.Helper()
	before := stateOf(k.t, k.s)
	if k.tree != nil {
		// The store's connection goes first: Close then writes nothing.
		k.s.db.tree.Close()
	} else {
		k.dir = crashCopy(k.t, k.s)
	}
	k.s.Close()
	k.reopened(k.open(k.t))
	if after := stateOf(k.t, k.s); after != before {
		k.t.Fatalf("state after a crash differs\nbefore %s\nafter  %s", before, after)
	}
}

// reopened points k and its principals at s.
func (k *svc) reopened(s *Service) {
	k.s = s
	for _, p := range append([]*Principal{k.alice, k.coord}, mapValues(k.w)...) {
		p.s = s
	}
}

func mapValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// stateOf renders everything a Service keeps per Group, decision state and
// the records beside it, as stable JSON.
func stateOf(t testing.TB, s *Service) string {
	t.Helper()
	type groupView struct {
		Group       any
		Members     any
		Usage       any
		Grants      any
		Leases      any
		Artifacts   any
		Descendants any
		Last, First uint64
		Archived    bool
		MissionID   string
	}
	out := map[string]groupView{}
	for _, id := range s.GroupIDs() {
		gs := s.group(id)
		gs.mu.Lock()
		out[id] = groupView{gs.g, gs.members, gs.usage, gs.grants, gs.leases, gs.artifacts, gs.descendants, gs.last, gs.first, gs.archived, gs.missionID}
		raw, err := json.Marshal(out[id])
		gs.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		_ = json.Unmarshal(raw, &v)
		out[id] = groupView{Group: v}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestCrashReopenFoldsTheLog crashes the authority after commands of a
// WorkItem's whole life, with checkpoints every 1, 2, 3 and 512 events:
// each time the store, reopened, gives back exactly the state it had, and
// the log continues without a gap.
func TestCrashReopenFoldsTheLog(t *testing.T) {
	for _, every := range []uint64{1, 2, 3, 0} {
		k := newSvcEvery(t, every)
		k.crash()
		w := k.toActive("wi-1")
		k.crash()
		epoch, lease := w.Ownership.OwnershipEpoch, w.Lease.LeaseID
		k.ok(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: lease, Progress: progress(k.clk.Now())})
		k.crash()
		k.ok(k.w["w1"], protocol.CmdWorkCheckpoint, &protocol.CheckpointWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: lease,
			CheckpointID: "cp-1", StateDigest: protocol.Digest([]byte("s")), Progress: progress(k.clk.Now()), Reason: protocol.CheckpointPreempted})
		k.ok(k.w["w1"], protocol.CmdWorkPropose, &protocol.ProposeWorkPayload{ProposalID: "prop-1", MissionID: "mis-a", Summary: "more"})
		k.crash()
		k.ok(k.w["w1"], protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch})
		lease = k.item("wi-1").Lease.LeaseID
		k.ok(k.w["w1"], protocol.CmdResourceUsageRecord, &protocol.RecordResourceUsagePayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: lease, UsageDelta: protocol.Usage{Tokens: 10}})
		k.clk.Advance(time.Second)
		k.crash()
		k.ok(k.w["w1"], protocol.CmdWorkSubmit, &protocol.SubmitWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: epoch, LeaseID: lease,
			Artifacts: protocol.List[string]{protocol.Digest([]byte("x"))}, Evidence: protocol.List[protocol.Evidence]{evidence("wi-1", "ac-1", "ac-2")}})
		k.ok(k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: "wi-1", ContractRevision: 1})
		k.crash()
		// A clean close checkpoints; the reopened store folds nothing.
		before := stateOf(t, k.s)
		k.s.Close()
		k.reopened(openSvcEvery(t, k.dir, k.clk, k.akey, every))
		if got := stateOf(t, k.s); got != before {
			t.Fatalf("every %d: state after close and open differs\nbefore %s\nafter  %s", every, before, got)
		}
		gs := k.s.group("grp-a")
		if gs.saved.seq != gs.last {
			t.Fatalf("every %d: state saved as of %d after a clean close, last event %d", every, gs.saved.seq, gs.last)
		}
		k.ok(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m", ConversationID: "c", Text: "x"})
		checkLog(t, k.s, "grp-a")
	}
}

// TestCheckpointWritesOnlyWhatChanged: between checkpoints a commit writes
// no WorkItem record; a checkpoint writes the WorkItems that changed since
// the last one, once each.
func TestCheckpointWritesOnlyWhatChanged(t *testing.T) {
	k := newSvcEvery(t, 1000)
	k.toActive("wi-1")
	k.toActive("wi-2")
	gs := k.s.group("grp-a")
	rec := &recorder{}
	gs.mu.Lock()
	err := gs.checkpoint(rec, gs.last)
	gs.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(rec.items.keys); got != 2 {
		t.Fatalf("first checkpoint wrote %d WorkItems, want 2", got)
	}
	w := k.item("wi-1")
	k.ok(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: w.Ownership.OwnershipEpoch, LeaseID: w.Lease.LeaseID, Progress: progress(k.clk.Now())})
	var items int
	_ = k.s.db.bolt.View(func(tx *bolt.Tx) error {
		items = tx.Bucket(bucketGroups).Bucket([]byte("grp-a")).Bucket(bucketItems).Stats().KeyN
		return nil
	})
	if items != 0 {
		t.Fatalf("%d WorkItem records written between checkpoints", items)
	}
	rec = &recorder{}
	gs.mu.Lock()
	err = gs.checkpoint(rec, gs.last)
	gs.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.items.keys) != 1 || string(rec.items.keys[0]) != "wi-1" {
		t.Fatalf("checkpoint after one renewal wrote %q, want wi-1 only", rec.items.keys)
	}
}

// TestStoreWithoutStateMarker opens a store laid out as before
// checkpoints (records current at every commit, no stateSeq, every lease
// in one value) and requires the same state, the marker added, and a crash
// afterwards to fold correctly.
func TestStoreWithoutStateMarker(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	k.ok(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: w.Ownership.OwnershipEpoch, LeaseID: w.Lease.LeaseID, Progress: progress(k.clk.Now())})
	before := stateOf(t, k.s)
	k.s.Close() // checkpoints: the records are current
	db, err := bolt.Open(filepath.Join(k.dir, LogFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		g := tx.Bucket(bucketGroups).Bucket([]byte("grp-a"))
		meta := g.Bucket(bucketMeta)
		if err := meta.Delete(keyStateSeq); err != nil {
			return err
		}
		leases := map[string]json.RawMessage{}
		if err := g.Bucket(bucketLeases).ForEach(func(k, v []byte) error { leases[string(k)] = append([]byte(nil), v...); return nil }); err != nil {
			return err
		}
		if err := putJSON(meta, keyLeases, leases); err != nil {
			return err
		}
		return g.DeleteBucket(bucketLeases)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	k.reopened(openSvc(t, k.dir, k.clk, k.akey))
	if got := stateOf(t, k.s); got != before {
		t.Fatalf("old layout read back differently\nbefore %s\nafter  %s", before, got)
	}
	_ = k.s.db.bolt.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketGroups).Bucket([]byte("grp-a")).Bucket(bucketMeta).Get(keyStateSeq)
		if len(v) != 8 || seqFromKey(v) != k.s.LastSequence("grp-a") {
			t.Fatalf("stateSeq %x after open, want %d", v, k.s.LastSequence("grp-a"))
		}
		return nil
	})
	w = k.item("wi-1")
	k.ok(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: w.Ownership.OwnershipEpoch, LeaseID: w.Lease.LeaseID, Progress: progress(k.clk.Now())})
	k.crash()
	checkLog(t, k.s, "grp-a")
}

// TestCompactThenCrash: compaction deletes events the records must then
// hold, so it checkpoints first; a crash after it reopens to the same
// state.
func TestCompactThenCrash(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	for _, id := range []string{"m1", "m2", "m3"} {
		k.ok(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: id, ConversationID: "c", Text: "x"})
	}
	if _, err := k.s.Compact("grp-a", 2); err != nil {
		t.Fatal(err)
	}
	w := k.item("wi-1")
	k.ok(k.w["w1"], protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: w.Ownership.OwnershipEpoch, LeaseID: w.Lease.LeaseID, Progress: progress(k.clk.Now())})
	k.crash()
}
