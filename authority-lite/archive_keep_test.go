package authoritylite

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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

// TestReceiptsTimeRule: an archived Group's receipts stay as long as a
// retry can still arrive (receiptWindow from the archive), however short
// the archive delay: a retry of its last command right after the archive
// is answered with its receipt. Past the window, with retention on, they
// go from the store and from memory; with retention off they stay.
func TestReceiptsTimeRule(t *testing.T) {
	cases := []struct {
		name   string
		retain uint64
		want   bool // the receipt is still kept past the window
	}{
		{"retention on: dropped past the window", 1000, false},
		{"retention off: kept", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newSvc(t)
			k.toActive("wi-1")
			_, raw, err := k.coord.Build(protocol.CmdWorkCancel, "grp-a", &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "not needed"})
			if err != nil {
				t.Fatal(err)
			}
			r, err := k.s.Submit(context.Background(), "", raw)
			if err != nil {
				t.Fatal(err)
			}
			k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "done with it"})
			if err := k.s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), VerifyEvery: 1000 * time.Hour,
				ArchiveAfter: time.Nanosecond, RetainEvents: tc.retain})
			if err != nil {
				t.Fatal(err)
			}
			k.rebind(s)
			w3 := k.join("w3")
			k.clk.Advance(time.Second)
			// The background archiver may be the one that archives it.
			if k.s.ArchiveDue(context.Background()); !k.s.Released("grp-a") {
				t.Fatal("not archived")
			}
			// A late retry, within the clock skew of its issuedAt.
			k.clk.Advance(time.Minute)
			again, err := k.s.Submit(context.Background(), "", raw)
			if err != nil || again.ActionID != r.ActionID || len(again.Events) != len(r.Events) {
				t.Fatalf("retry right after the archive: %+v %v, want %+v", again, err, r)
			}
			// Late in the window, 2×skew + the offline grace from the
			// archive, a worker back from its offline spell still gets the
			// receipt.
			k.clk.Advance(2*k.s.skew() + k.s.offlineGrace() - 2*time.Minute)
			k.s.ArchiveDue(context.Background())
			if _, ok := k.s.receipts.get(k.coord.Actor, r.ActionID); !ok {
				t.Fatal("the receipt was dropped within 2×skew + the offline grace")
			}
			k.clk.Advance(k.s.receiptWindow())
			k.s.ArchiveDue(context.Background())
			if _, ok := k.s.receipts.get(k.coord.Actor, r.ActionID); ok != tc.want {
				t.Fatalf("receipt kept %v, want %v", ok, tc.want)
			}
			var stored bool
			_ = k.s.db.bolt.View(func(tx *bolt.Tx) error {
				stored = tx.Bucket(bucketReceipts).Get(receiptKey(k.coord.Actor, r.ActionID)) != nil
				return nil
			})
			if stored != tc.want {
				t.Fatalf("receipt in the store %v, want %v", stored, tc.want)
			}
			// Organization commands' receipts (w3's card registration and
			// session, all it did) go by their own age with retention on.
			org := 0
			_ = k.s.db.bolt.View(func(tx *bolt.Tx) error {
				c := tx.Bucket(bucketReceipts).Cursor()
				prefix := receiptKey(w3.Actor, "")
				for key, _ := c.Seek(prefix); bytes.HasPrefix(key, prefix); key, _ = c.Next() {
					org++
				}
				return nil
			})
			if (org > 0) != tc.want {
				t.Fatalf("%d Organization receipts kept, want some %v", org, tc.want)
			}
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

// TestPurgeArchivedGroup: with PurgeAfter, a released Group whose archive
// is that old (and at least receiptWindow) is deleted: unknown to its
// members (GROUP_NOT_FOUND), its snapshot files gone, its id never given
// to a new Group; a restart and `authority check` agree, and an archived
// Group not due yet keeps serving CURSOR_TOO_OLD with its snapshot.
func TestPurgeArchivedGroup(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "not needed"})
	k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "done with it"})
	open := func() {
		t.Helper()
		if err := k.s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), VerifyEvery: 1000 * time.Hour,
			ArchiveAfter: time.Minute, RetainEvents: 1000, PurgeAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		k.rebind(s)
	}
	open()
	ctx := context.Background()
	k.clk.Advance(2 * time.Minute)
	// The background archiver may be the one that archives it.
	if k.s.ArchiveDue(ctx); !k.s.Released("grp-a") {
		t.Fatal("not archived")
	}
	snaps := func() int {
		es, _ := os.ReadDir(filepath.Join(k.dir, "snapshots"))
		return len(es)
	}
	if snaps() == 0 {
		t.Fatal("no archive snapshot")
	}
	// Not due yet, and across a restart: still served.
	open()
	k.clk.Advance(59 * time.Minute)
	k.s.ArchiveDue(ctx)
	if _, err := k.s.Events("grp-a", 0, 0); protocol.CodeOf(err) != protocol.CodeCursorTooOld {
		t.Fatalf("read from 0 before the purge: %v", err)
	}
	// Its WorkItem records are gone; a read finds the item in the archive
	// snapshot, across the restart.
	if w := k.item("wi-1"); w.State != protocol.WorkCancelled {
		t.Fatalf("wi-1 read back from the archive snapshot: %s", w.State)
	}
	k.clk.Advance(2 * time.Minute)
	k.s.ArchiveDue(ctx)
	if !k.s.Purged("grp-a") || snaps() != 0 {
		t.Fatalf("purged %v, snapshot files %d", k.s.Purged("grp-a"), snaps())
	}
	for i := 0; i < 2; i++ {
		if err := k.s.Authorize("w1", "grp-a"); protocol.CodeOf(err) != protocol.CodeGroupNotFound {
			t.Fatalf("a member reads a purged Group: %v", err)
		}
		if _, err := k.s.Events("grp-a", 0, 0); protocol.CodeOf(err) != protocol.CodeGroupNotFound {
			t.Fatalf("events of a purged Group: %v", err)
		}
		if st := k.s.Status(); len(st.Groups) != 0 {
			t.Fatalf("status lists %+v", st.Groups)
		}
		k.refuse(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-b", Title: "again", Objective: "reuse the id", PriorityClass: protocol.PriorityNormal}, protocol.CodeInvalidStateTransition)
		if err := k.s.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err := Check(filepath.Join(k.dir, LogFile), time.Second)
		if err != nil || !rep.OK {
			t.Fatalf("check: %v %+v", err, rep.Problems)
		}
		open()
	}
}

// TestReleaseRedrivenAtOpen: a Group archived but not released (the
// process ended between the archive's commit and its release) is released
// by the next Open, and so purged in time; before, nothing released it and
// it kept its records, receipts and memory for good.
func TestReleaseRedrivenAtOpen(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "not needed"})
	k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "done with it"})
	open := func(hold bool) {
		t.Helper()
		if err := k.s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), VerifyEvery: 1000 * time.Hour,
			ArchiveAfter: time.Minute, RetainEvents: 1000, PurgeAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		s.holdRelease = hold
		k.rebind(s)
	}
	archived := func() bool {
		for _, g := range k.s.Status().Groups {
			if g.GroupID == "grp-a" {
				return g.Archived
			}
		}
		return false
	}
	open(true)
	ctx := context.Background()
	k.clk.Advance(2 * time.Minute)
	k.s.ArchiveDue(ctx) // or the background archiver did
	if !archived() || k.s.Released("grp-a") {
		t.Fatalf("before the restart: archived %v, released %v; want archived only", archived(), k.s.Released("grp-a"))
	}
	open(false)
	if !k.s.Released("grp-a") {
		t.Fatal("not released by the next Open")
	}
	// The store part too: its WorkItem records and its receipt index go.
	_ = k.s.db.bolt.View(func(tx *bolt.Tx) error {
		g := tx.Bucket(bucketGroups).Bucket([]byte("grp-a"))
		if n := g.Bucket(bucketItems).Stats().KeyN; n != 0 || g.Bucket(bucketGroupReceipts) != nil || tx.Bucket(bucketReleased).Get([]byte("grp-a")) == nil {
			t.Errorf("after the next Open: %d WorkItem records, receipt index %v, in released %v; want none, none, yes",
				n, g.Bucket(bucketGroupReceipts) != nil, tx.Bucket(bucketReleased).Get([]byte("grp-a")) != nil)
		}
		return nil
	})
	k.clk.Advance(2 * time.Hour)
	if k.s.ArchiveDue(ctx); !k.s.Purged("grp-a") {
		t.Fatal("not purged once due")
	}
}

// TestPurgedSnapshotRemovedAtOpen: the snapshot files of a purged Group
// are removed by the next Open when the process ended between the purge's
// commit and their removal; before, they stayed on disk for good.
func TestPurgedSnapshotRemovedAtOpen(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "not needed"})
	k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "done with it"})
	open := func(hold bool) {
		t.Helper()
		if err := k.s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), VerifyEvery: 1000 * time.Hour,
			ArchiveAfter: time.Minute, RetainEvents: 1000, PurgeAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		s.snaps.hold = hold
		k.rebind(s)
	}
	snaps := func() int {
		es, _ := os.ReadDir(filepath.Join(k.dir, "snapshots"))
		return len(es)
	}
	recorded := func() (n int) {
		_ = k.s.db.bolt.View(func(tx *bolt.Tx) error { n = tx.Bucket(bucketGoneFiles).Stats().KeyN; return nil })
		return n
	}
	open(true)
	ctx := context.Background()
	k.clk.Advance(2 * time.Minute)
	k.s.ArchiveDue(ctx) // or the background archiver did
	k.clk.Advance(2 * time.Hour)
	k.s.ArchiveDue(ctx)
	if !k.s.Purged("grp-a") || snaps() == 0 || recorded() == 0 {
		t.Fatalf("before the restart: purged %v, snapshot files %d, recorded %d; want a purge with its files left and recorded",
			k.s.Purged("grp-a"), snaps(), recorded())
	}
	open(false)
	if snaps() != 0 || recorded() != 0 {
		t.Fatalf("after the next Open: snapshot files %d, recorded %d; want none", snaps(), recorded())
	}
}
