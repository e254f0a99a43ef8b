package queue

import (
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// RestoreSnapshot handles CURSOR_TOO_OLD (spec 16): it checks a Group
// Snapshot fetched by the reference the authority sent (its JCS digest must
// equal ref.Digest, and verify, given the parsed document, must accept its
// signature: pass protocol.Verify bound to the authority's key), then
// atomically replaces that Group's inbox, projection and cursor with the
// snapshot's state and sequence. Buffered events past the snapshot are
// applied at once; replay continues after ref.Sequence.
//
// A snapshot behind the Group's durable cursor is refused: it would move
// the cursor back. Restoring the same snapshot again changes nothing.
func (s *Store) RestoreSnapshot(ref protocol.SnapshotRef, doc []byte, verify func(doc map[string]any) error) (Result, error) {
	snap, raw, err := group.CheckSnapshot(ref, doc, verify)
	if err != nil {
		return Result{}, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return Result{}, ErrClosed
	}
	old := s.groups[ref.GroupID]
	// A diverged Group may go back to any snapshot of the authority: that
	// is its resync (see Divergence).
	if old != nil && old.cursor > snap.Sequence && old.diverged == nil {
		return Result{}, protocol.Errorf(protocol.CodeProtocolViolation,
			"snapshot %s of group %s ends at sequence %d, behind the durable cursor %d", ref.SnapshotID, ref.GroupID, snap.Sequence, old.cursor)
	}
	if old != nil && old.snapRef != nil && *old.snapRef == ref && old.cursor >= snap.Sequence {
		return Result{}, nil
	}
	ns := snapshotState(snap)
	ns.snapRef = &ref
	if old != nil {
		ns.buf = old.buf
		ns.buf.dropThrough(snap.Sequence)
	}
	p := &groupPlan{g: ns, isNew: true, pending: map[uint64]candidateEv{}}
	var res Result
	err = s.update(func(tx *bolt.Tx) error {
		res = Result{}
		groups := tx.Bucket(bktGroups)
		if groups.Bucket([]byte(ref.GroupID)) != nil {
			if err := groups.DeleteBucket([]byte(ref.GroupID)); err != nil {
				return err
			}
		}
		_, meta, _, queue, err := groupBuckets(tx, ref.GroupID)
		if err != nil {
			return err
		}
		refJSON, err := json.Marshal(ref)
		if err != nil {
			return err
		}
		for _, kv := range [][2][]byte{
			{keyCursor, u64(snap.Sequence)}, {keyBase, u64(snap.Sequence)},
			{keySnapshot, raw}, {keySnapshotRef, refJSON},
		} {
			if err := meta.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		all := newOverlay(newGroupState(ref.GroupID))
		all.items, all.mis, all.members = ns.items, &ns.mis, ns.members
		if err := writeProjection(meta, queue, all); err != nil {
			return err
		}
		// Events held beyond the snapshot may now continue it.
		if _, ok := ns.buf.get(snap.Sequence + 1); ok {
			return s.applyGroup(tx, p, &res)
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("queue: restore snapshot: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[ref.GroupID] = ns
	for _, m := range sortedMembers(ns.members) {
		res.Members = append(res.Members, MemberRef{GroupID: ref.GroupID, Principal: m.Principal})
	}
	s.settle(ref.GroupID, p, &res)
	if len(res.Cursors) == 0 {
		res.Cursors = append(res.Cursors, protocol.Cursor{GroupID: ref.GroupID, Sequence: ns.cursor})
	}
	return res, nil
}

// snapshotState is the projection of a snapshot: the state replay of the
// inbox continues from. It is deterministic in the snapshot.
func snapshotState(snap *protocol.GroupSnapshot) *groupState {
	g := newGroupState(snap.GroupID)
	g.cursor, g.base = snap.Sequence, snap.Sequence
	m := snap.Mission
	rec := m
	g.mis = MissionView{MissionID: m.MissionID, State: m.State, PriorityClass: m.PriorityClass, Revision: m.Revision, UpdatedSeq: snap.Sequence, Record: &rec}
	for _, ms := range snap.Memberships {
		g.members[memberKey(ms.Principal)] = Member{Principal: ms.Principal, Epoch: ms.MembershipEpoch, State: ms.State, UpdatedSeq: snap.Sequence}
	}
	restored := group.FromSnapshot(snap, group.Limits{})
	for _, wi := range snap.WorkItems {
		w := restored.Items[wi.WorkItemID]
		// The snapshot does not say when a queued item's wait began; its
		// last update is the closest the authority's record offers.
		f := &fact{GroupID: snap.GroupID, Seq: snap.Sequence, OccurredAt: wi.UpdatedAt}
		e := entryOf(nil, w, f, &wi.Contract, false)
		g.items[e.WorkItemID] = e
	}
	for _, e := range g.items {
		for i := range e.Dependencies {
			if d := g.items[e.Dependencies[i].WorkItemID]; d != nil {
				e.Dependencies[i].State = d.State
			}
		}
		g.index(e)
	}
	return g
}

// Contract returns the current Work Contract of an item: as last carried in
// full (by work.authorized, work.offer.created, work.contract.revised or the
// restored snapshot), with later dependency insertions applied.
func (s *Store) Contract(groupID, workItemID string) (protocol.WorkContract, error) {
	e, ok := s.Item(groupID, workItemID)
	if !ok {
		return protocol.WorkContract{}, fmt.Errorf("queue: group %s has no work item %s", groupID, workItemID)
	}
	var c protocol.WorkContract
	err := s.view(func(tx *bolt.Tx) error {
		gb := tx.Bucket(bktGroups).Bucket([]byte(groupID))
		if gb == nil {
			return fmt.Errorf("queue: unknown group %s", groupID)
		}
		meta := gb.Bucket(bktMeta)
		if snapRaw := meta.Get(keySnapshot); snapRaw != nil && e.ContractSeq <= getU64(meta.Get(keyBase)) {
			var snap protocol.GroupSnapshot
			if err := json.Unmarshal(snapRaw, &snap); err != nil {
				return err
			}
			for _, wi := range snap.WorkItems {
				if wi.WorkItemID == workItemID {
					c = wi.Contract
					return nil
				}
			}
			return fmt.Errorf("queue: snapshot of group %s lacks work item %s", groupID, workItemID)
		}
		raw := gb.Bucket(bktInbox).Get(u64(e.ContractSeq))
		if raw == nil {
			return fmt.Errorf("queue: group %s inbox lacks event %d", groupID, e.ContractSeq)
		}
		var ev struct {
			Payload struct {
				Contract *protocol.WorkContract `json:"contract"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			return err
		}
		if ev.Payload.Contract == nil {
			return fmt.Errorf("queue: group %s event %d carries no contract", groupID, e.ContractSeq)
		}
		c = *ev.Payload.Contract
		return nil
	})
	if err != nil {
		return protocol.WorkContract{}, err
	}
	c.Revision = max(c.Revision, e.ContractRevision)
	for _, d := range e.Dependencies {
		if !slices.ContainsFunc(c.Dependencies, func(x protocol.Dependency) bool { return x.WorkItemID == d.WorkItemID }) {
			c.Dependencies = append(c.Dependencies, protocol.Dependency{WorkItemID: d.WorkItemID, Policy: d.Policy})
		}
	}
	return c, nil
}
