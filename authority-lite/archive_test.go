package authoritylite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// reopenArchiving reopens k's Service with archiving after an hour and
// retention on.
func (k *svc) reopenArchiving() {
	k.t.Helper()
	if err := k.s.Close(); err != nil {
		k.t.Fatal(err)
	}
	s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), VerifyEvery: 1000 * time.Hour,
		ArchiveAfter: time.Hour, RetainEvents: 1000})
	if err != nil {
		k.t.Fatal(err)
	}
	k.rebind(s)
}

// TestArchiveFinishedGroup: a Group whose Mission and WorkItems are all
// terminal is archived by the authority once its last event is
// ArchiveAfter old, through group_archive; it then refuses commands, its
// history before the archive snapshot is gone (CURSOR_TOO_OLD with the
// snapshot), its state is released and read back on demand, and a
// restart loads it as a stub. A Group with a WorkItem still open is not
// archived.
func TestArchiveFinishedGroup(t *testing.T) {
	cases := []struct {
		name          string
		cancelMission bool
		wantArchiv    bool
	}{
		{"mission cancelled, items terminal", true, true},
		{"mission active, items terminal", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newSvc(t)
			k.toActive("wi-1")
			k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-1", Reason: "not needed"})
			if tc.cancelMission {
				k.ok(k.alice, protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: "mis-a", Reason: "done with it"})
			}
			k.reopenArchiving()
			ctx := context.Background()
			k.clk.Advance(59 * time.Minute)
			if got := k.s.ArchiveDue(ctx); len(got) != 0 {
				t.Fatalf("archived %v before the delay", got)
			}
			if got := k.s.MemberGroups("w1"); !slices.Contains(got, "grp-a") {
				t.Fatalf("w1's Groups before the archive: %v", got)
			}
			changed := k.s.MembershipChanged()
			k.clk.Advance(2 * time.Minute)
			k.s.ArchiveDue(ctx)
			gs := k.s.peekGroup("grp-a")
			if gs.stub.Load() != tc.wantArchiv {
				t.Fatalf("released %v, want %v (item %s)", gs.stub.Load(), tc.wantArchiv, k.item("wi-1").State)
			}
			// An archived Group leaves its members' lists (the GROUPS
			// notice), so a worker that forgot it drops its tombstone.
			listed := slices.Contains(k.s.MemberGroups("w1"), "grp-a")
			select {
			case <-changed:
				if !tc.wantArchiv {
					t.Fatal("membership notice without an archive")
				}
			default:
				if tc.wantArchiv {
					t.Fatal("no membership notice for the archive")
				}
			}
			if listed == tc.wantArchiv {
				t.Fatalf("w1's Groups list grp-a: %v, archived %v", listed, tc.wantArchiv)
			}
			if !tc.wantArchiv {
				return
			}
			last := k.s.LastSequence("grp-a")
			tail, err := k.s.Events("grp-a", last-2, 0)
			if err != nil || len(tail) != 2 || tail[0].Type != protocol.EvtGroupSnapshotCreated || tail[1].Type != protocol.EvtGroupArchived {
				t.Fatalf("online tail: %v %+v", err, tail)
			}
			if _, err := k.s.Events("grp-a", 0, 0); protocol.CodeOf(err) != protocol.CodeCursorTooOld {
				t.Fatalf("read from 0 of an archived Group: %v", err)
			}
			k.refuse(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m", ConversationID: "c", Text: "x"}, protocol.CodeInvalidStateTransition)
			if w := k.item("wi-1"); w.State != protocol.WorkCancelled || gs.stub.Load() {
				t.Fatalf("read back: %s, stub %v", w.State, gs.stub.Load())
			}
			k.reopenArchiving()
			gs = k.s.peekGroup("grp-a")
			if !gs.stub.Load() || !gs.archived || k.s.LastSequence("grp-a") != last {
				t.Fatalf("after restart: stub %v archived %v last %d, want %d", gs.stub.Load(), gs.archived, k.s.LastSequence("grp-a"), last)
			}
			if m, ok := k.s.Mission("grp-a"); !ok || m.State != protocol.MissionCancelled {
				t.Fatalf("mission of the stub: %+v %v", m, ok)
			}
			if err := k.s.Authorize("w1", "grp-a"); err != nil {
				t.Fatalf("a member reads an archived Group: %v", err)
			}
			k.s.Close()
			rep, err := Check(filepath.Join(k.dir, LogFile), time.Second)
			if err != nil || !rep.OK {
				t.Fatalf("check: %v %+v", err, rep.Problems)
			}
			k.reopenArchiving()
		})
	}
}

// TestFinishedRule is the archiver's choice: Mission terminal and every
// WorkItem terminal, and the last event ArchiveAfter old.
func TestFinishedRule(t *testing.T) {
	item := func(st protocol.WorkItemState) *group.WorkItem {
		return &group.WorkItem{WorkItem: protocol.WorkItem{State: st}}
	}
	cases := []struct {
		name    string
		mission protocol.MissionState
		items   []protocol.WorkItemState
		want    bool
	}{
		{"approved, items verified and cancelled", protocol.MissionApproved, []protocol.WorkItemState{protocol.WorkVerified, protocol.WorkCancelled}, true},
		{"cancelled, no items", protocol.MissionCancelled, nil, true},
		{"approved, an item active", protocol.MissionApproved, []protocol.WorkItemState{protocol.WorkVerified, protocol.WorkActive}, false},
		{"active, items verified", protocol.MissionActive, []protocol.WorkItemState{protocol.WorkVerified}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := group.NewGroup("grp", testLimits())
			g.Mission = &protocol.Mission{MissionID: "m", State: tc.mission}
			for i, st := range tc.items {
				g.Items[fmt.Sprint(i)] = item(st)
			}
			if got := finished(g); got != tc.want {
				t.Fatalf("finished = %v, want %v", got, tc.want)
			}
		})
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if archiveDue(at, at.Add(time.Hour-time.Nanosecond), time.Hour) || !archiveDue(at, at.Add(time.Hour), time.Hour) {
		t.Fatal("archiveDue: the delay is not applied as at least ArchiveAfter")
	}
}
