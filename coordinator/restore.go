package coordinator

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// A coordinator started (or fallen behind) on a Group whose log the
// authority compacted (retention: docs/operations.md "Retention, archiving
// and disk") reads CURSOR_TOO_OLD where its position was. It restores the
// signed Group Snapshot the refusal names, as the worker's store does
// (group.SnapshotRefOf, group.CheckSnapshot, group.FromSnapshot), and reads
// on after the snapshot's sequence. What a snapshot does not carry — the
// manifests, submissions, offers and Context Packages of the view — it
// takes from the events still online up to the snapshot (the last
// retained ones); older ones are gone: a coordinator-made input published
// only before them is published again, which the authority takes.

// restoreFrom answers err, the refusal of a read from the view's position:
// when it is CURSOR_TOO_OLD naming a snapshot past that position and the
// Authority serves snapshots, the view is rebuilt from the snapshot and
// restored is true. Otherwise err is returned as it is.
func (c *Coordinator) restoreFrom(ctx context.Context, err error) (restored bool, _ error) {
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeCursorTooOld {
		return false, err
	}
	ref, ok := group.SnapshotRefOf(pe)
	snaps, serves := c.cfg.Authority.(Snapshots)
	if !ok || !serves || ref.GroupID != c.v.g.GroupID || ref.Sequence <= c.v.lastSeq {
		return false, err
	}
	snap, serr := snaps.Snapshot(ctx, ref)
	if serr != nil {
		return false, serr
	}
	var online []SignedEvent
	if first, ok := firstOnline(pe); ok && first <= snap.Sequence {
		// Compacted again meanwhile: restore without them.
		online, _ = c.cfg.Authority.Events(ctx, ref.GroupID, first-1, int(snap.Sequence-first+1))
	}
	v, verr := restoredView(snap, online)
	if verr != nil {
		return false, verr
	}
	c.cfg.Logger.Info("the authority compacted the Group's log: restored its snapshot", "group", ref.GroupID, "snapshot", ref.SnapshotID,
		"sequence", snap.Sequence, "online", len(online))
	c.v = v
	return true, nil
}

// restoredView is the view of a checked snapshot, with the history online
// up to it (events of its Group at or below its sequence, in order) noted.
func restoredView(snap *protocol.GroupSnapshot, online []SignedEvent) (*view, error) {
	v := newView(snap.GroupID)
	v.g = group.FromSnapshot(snap, group.Limits{})
	v.lastSeq = snap.Sequence
	for _, m := range snap.Memberships {
		v.members[m.Principal] = m
	}
	for _, h := range snap.Artifacts {
		v.published[h] = true
	}
	if lease := snap.Mission.Coordinator; lease != nil {
		v.assigned[lease.AgentID] = lease.CoordinatorEpoch
	}
	for _, se := range online {
		if se.Sequence > snap.Sequence {
			break
		}
		var ev protocol.Event
		if err := json.Unmarshal(se.Raw, &ev); err != nil {
			return nil, protocol.Errorf(protocol.CodeProtocolViolation, "coordinator: event %d: %v", se.Sequence, err)
		}
		if _, known := group.Events[ev.Type]; !known || ev.GroupID != snap.GroupID {
			continue
		}
		fe, err := group.FromWire(&ev)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeProtocolViolation, "coordinator: event %s: %v", ev.EventID, err)
		}
		switch fe.Payload.(type) {
		case *protocol.Membership, *group.CoordinatorAssigned:
			continue // the snapshot holds their outcome
		case *group.ContextPublished:
			if err := v.g.Fold(fe); err != nil {
				return nil, err
			}
		}
		v.note(&ev, fe, v.itemOf(fe))
	}
	return v, nil
}

// firstOnline reads details.firstSequence of a CURSOR_TOO_OLD: the lowest
// sequence the authority still holds online.
func firstOnline(e *protocol.Error) (uint64, bool) {
	switch f := e.Details["firstSequence"].(type) {
	case uint64:
		return f, f > 0
	case int64:
		return uint64(f), f > 0
	case float64:
		if f >= 1 && f == float64(uint64(f)) {
			return uint64(f), true
		}
	}
	return 0, false
}
