package remote_test

import (
	"context"
	"errors"
	"testing"

	"github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
)

var _ coordinator.Snapshots = (*remote.Authority)(nil)

// A reader behind a compacted log gets CURSOR_TOO_OLD naming a snapshot
// over the routes, fetches it over loopback (checked against the
// authority's key) and reads on after it; another Group's snapshot digest
// is not served under this Group.
func TestSnapshotOverTheRoutes(t *testing.T) {
	k := newKit(t)
	ctx := context.Background()
	h, err := k.dial(alice, k.alice)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"grp:s.1", "grp:s.2"} {
		k.submit(h, k.alice, protocol.CmdMissionCreate, protocol.Envelope{GroupID: g},
			&protocol.CreateMissionPayload{MissionID: "mis" + g[3:], Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal})
		k.submit(h, k.alice, protocol.CmdMissionAssignCoordinator, protocol.Envelope{GroupID: g, MembershipEpoch: protocol.Uint64(1)},
			&protocol.AssignCoordinatorPayload{MissionID: "mis" + g[3:], AgentID: "coord", LeaseDurationMs: 3600000})
	}
	ref, err := k.a.Service.Compact("grp:s.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Events(ctx, "grp:s.1", 0, 0)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeCursorTooOld {
		t.Fatalf("Events from 0 after compaction = %v, want CURSOR_TOO_OLD", err)
	}
	got, ok := group.SnapshotRefOf(pe)
	if !ok || got.Digest != ref.Digest || got.Sequence != ref.Sequence {
		t.Fatalf("CURSOR_TOO_OLD names %+v (%v), want %+v", got, ok, ref)
	}
	snap, err := h.Snapshot(ctx, got)
	if err != nil || snap.GroupID != "grp:s.1" || snap.Sequence != ref.Sequence || snap.Mission.Coordinator == nil {
		t.Fatalf("Snapshot = %+v, %v", snap, err)
	}
	if evs, err := h.Events(ctx, "grp:s.1", snap.Sequence, 0); err != nil || len(evs) == 0 || evs[0].Sequence != snap.Sequence+1 {
		t.Fatalf("Events after the snapshot = %v, %v", evs, err)
	}
	other := got
	other.GroupID = "grp:s.2"
	if _, err := h.Snapshot(ctx, other); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
		t.Fatalf("grp:s.1's snapshot under grp:s.2 = %v, want INVALID_COMMAND", err)
	}
}
