package authoritylite

import (
	"context"
	"os"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// archivedSvc is a Service whose Group grp-a is archived and released,
// with retention on (reopenArchiving), and the receipt of one of its
// commands: the WorkItem's cancel.
func archivedSvc(t *testing.T) (*svc, *protocol.Receipt) {
	k := newSvc(t)
	k.toActive("wi-1")
	r := k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "not needed"})
	k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "done with it"})
	k.reopenArchiving()
	k.clk.Advance(2 * time.Hour)
	if got := k.s.ArchiveDue(context.Background()); len(got) != 1 || !k.s.Released("grp-a") {
		t.Fatalf("archived %v, released %v", got, k.s.Released("grp-a"))
	}
	return k, r
}

// TestArchivedStubReads: what an archived Group's stub holds is read from
// it, without loading the Group's whole state back into memory for good;
// only a read of what it dropped (a WorkItem) loads it.
func TestArchivedStubReads(t *testing.T) {
	cases := []struct {
		name     string
		read     func(k *svc) bool
		wantLoad bool
	}{
		{"Head", func(k *svc) bool { _, ok := k.s.Head("grp-a"); return ok }, false},
		{"OnChange", func(k *svc) bool { k.s.OnChange("grp-a", 1<<60, func() {})(); return true }, false},
		{"Mission", func(k *svc) bool { m, ok := k.s.Mission("grp-a"); return ok && m.State == protocol.MissionCancelled }, false},
		{"Membership", func(k *svc) bool {
			_, ok := k.s.Membership("grp-a", protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"})
			return ok
		}, false},
		{"LastSequence", func(k *svc) bool { return k.s.LastSequence("grp-a") > 0 }, false},
		{"WorkItem", func(k *svc) bool {
			w, ok := k.s.WorkItem("grp-a", "wi-1")
			return ok && w.State == protocol.WorkCancelled
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, _ := archivedSvc(t)
			if !tc.read(k) {
				t.Fatal("the read did not answer from the archived Group")
			}
			if loaded := !k.s.Released("grp-a"); loaded != tc.wantLoad {
				t.Fatalf("state loaded back %v, want %v", loaded, tc.wantLoad)
			}
		})
	}
}

// TestArchiveDropsReceipts: with retention on, an archived Group's
// receipts go with its history, from the store and from memory; a
// Group's that is not archived stay, and so do all with retention off.
func TestArchiveDropsReceipts(t *testing.T) {
	cases := []struct {
		name   string
		retain uint64
		want   bool // the receipt is still kept
	}{
		{"retention on: dropped", 1000, false},
		{"retention off: kept", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newSvc(t)
			k.toActive("wi-1")
			r := k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "not needed"})
			k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "done with it"})
			if err := k.s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), VerifyEvery: 1000 * time.Hour,
				ArchiveAfter: time.Hour, RetainEvents: tc.retain})
			if err != nil {
				t.Fatal(err)
			}
			k.rebind(s)
			// Warm the memory with the receipt, as a retry would.
			if _, ok := k.s.receipt(k.coord.Actor, r.ActionID); !ok {
				t.Fatal("no receipt before the archive")
			}
			k.s.recent.add(string(receiptKey(k.coord.Actor, r.ActionID)), receiptRecord{Receipt: *r})
			k.clk.Advance(2 * time.Hour)
			if got := k.s.ArchiveDue(context.Background()); len(got) != 1 {
				t.Fatalf("archived %v", got)
			}
			if _, ok := k.s.receipt(k.coord.Actor, r.ActionID); ok != tc.want {
				t.Fatalf("receipt kept %v, want %v", ok, tc.want)
			}
			var stored bool
			_ = k.s.db.View(func(tx *bolt.Tx) error {
				stored = tx.Bucket(bucketReceipts).Get(receiptKey(k.coord.Actor, r.ActionID)) != nil
				return nil
			})
			if stored != tc.want {
				t.Fatalf("receipt in the store %v, want %v", stored, tc.want)
			}
			// The Organization's receipts (agent registrations) stay.
			if _, ok := k.s.AgentCard("w1"); !ok {
				t.Fatal("w1's card gone")
			}
		})
	}
}

// TestSupersededSnapshots is which snapshot files go when a Group's
// events through cut are deleted and cur becomes its reference.
func TestSupersededSnapshots(t *testing.T) {
	ref := func(d string, seq uint64) protocol.SnapshotRef {
		return protocol.SnapshotRef{Digest: d, Sequence: seq}
	}
	p := func(r protocol.SnapshotRef) *protocol.SnapshotRef { return &r }
	cases := []struct {
		name      string
		prev      *protocol.SnapshotRef
		announced []protocol.SnapshotRef
		cur       protocol.SnapshotRef
		cut       uint64
		want      []string
	}{
		{"first snapshot", nil, nil, ref("b", 40), 20, nil},
		{"previous announced by a deleted event", p(ref("a", 20)), []protocol.SnapshotRef{ref("a", 20)}, ref("b", 40), 30, []string{"a"}},
		{"previous's announcement already gone", p(ref("a", 20)), nil, ref("b", 40), 30, []string{"a"}},
		{"previous still announced online", p(ref("a", 20)), nil, ref("b", 40), 20, nil},
		{"the current one is never removed", p(ref("b", 40)), []protocol.SnapshotRef{ref("b", 40)}, ref("b", 40), 50, nil},
		{"each once", p(ref("a", 20)), []protocol.SnapshotRef{ref("a", 20), ref("z", 5)}, ref("b", 40), 30, []string{"a", "z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := supersededSnapshots(tc.prev, tc.announced, tc.cur, tc.cut)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestArchiveKeepsOneSnapshot: compacted, then archived, a Group keeps
// one snapshot file, its archive snapshot's.
func TestArchiveKeepsOneSnapshot(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	if _, err := k.s.Compact("grp-a", 1); err != nil {
		t.Fatal(err)
	}
	k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "not needed"})
	if _, err := k.s.Compact("grp-a", 1); err != nil {
		t.Fatal(err)
	}
	k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "done with it"})
	k.reopenArchiving()
	k.clk.Advance(2 * time.Hour)
	if got := k.s.ArchiveDue(context.Background()); len(got) != 1 {
		t.Fatalf("archived %v", got)
	}
	files, err := os.ReadDir(k.s.cfg.Dir + "/snapshots")
	if err != nil || len(files) != 1 {
		t.Fatalf("snapshot files %v %v, want the archive's only", err, files)
	}
	gs := k.s.peekGroup("grp-a")
	if _, err := k.s.Snapshot(*gs.archiveRef); err != nil {
		t.Fatalf("the archive snapshot: %v", err)
	}
}
