package queue

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// Inbox pruning bounds (doc.go "Pruning the inbox").
const (
	// TailEvents is how many of a Group's newest events the inbox always
	// keeps: the overlap a divergence check re-reads below the cursor
	// (at least MinTailEvents), the duplicates compared byte for byte, and
	// the eventIds RecentEventIDs refills from on Open.
	TailEvents = 64
	// MinTailEvents is the smallest tail Options.PruneTail may ask for.
	MinTailEvents = 16
	// PruneEvery is how many events beyond the tail a Group's inbox
	// gathers before they are folded into its pruned base and deleted, so
	// the cost of a prune (reading the base, rewriting what changed in it)
	// is paid once per PruneEvery events, not per commit.
	PruneEvery = 256
)

// The smallest tail holds the overlap a SUBSCRIBE compares
// (diverge_wire.go): a build with a larger overlap does not compile.
var _ [MinTailEvents - OverlapEvents]struct{}

var (
	bktPruned     = []byte("pruned")
	bktPrunedItem = []byte("items")
	keySequence   = []byte("sequence")
	keyRecent     = []byte("recent")
)

// pruneBounds are the effective bounds of a Store.
func (o Options) pruneBounds() (tail, every uint64) {
	tail, every = TailEvents, PruneEvery
	if o.PruneTail > 0 {
		tail = uint64(max(o.PruneTail, MinTailEvents))
	}
	if o.PruneEvery > 0 {
		every = uint64(o.PruneEvery)
	}
	return tail, every
}

// pruneFloor is the lowest sequence the projection still reads from the
// inbox: the contract and Context Package events of every WorkItem that is
// not terminal, and the Mission-wide Context Package while the Mission is
// not. Nothing at or above it is pruned, so Store.Contract and
// Store.ContextPackage keep working for live work. ok is false when
// nothing is named.
func pruneFloor(o *overlay) (floor uint64, ok bool) {
	take := func(seq uint64) {
		if seq > 0 && (!ok || seq < floor) {
			floor, ok = seq, true
		}
	}
	visit := func(e *Entry) {
		if e.State.Terminal() {
			return
		}
		take(e.ContractSeq)
		take(e.ContextSeq)
	}
	for id, e := range o.g.items {
		if _, changed := o.items[id]; !changed {
			visit(e)
		}
	}
	for _, e := range o.items {
		visit(e)
	}
	if m := o.mission(); !m.State.Terminal() {
		take(m.ContextSeq)
	}
	return floor, ok
}

// prunePoint is the sequence through which Group p's inbox may be pruned
// after the batch of p, or 0 when it should not be pruned now.
func (s *Store) prunePoint(p *groupPlan) uint64 {
	if s.opts.NoPrune || p.ov == nil || p.diverged != nil {
		return 0
	}
	tail, every := s.opts.pruneBounds()
	cursor, base := p.cursor, p.g.base
	if cursor < base+tail+every || cursor < p.g.pruneCheck {
		return 0
	}
	point := cursor - tail
	if floor, ok := pruneFloor(p.ov); ok && floor <= point {
		point = floor - 1
	}
	if point < base+every {
		// Held by live work: look again only after another PruneEvery
		// events, so a stuck item does not cost a scan per commit.
		p.pruneCheck = cursor + every
		return 0
	}
	return point
}

// pruneGroup folds the Group's inbox events base+1…point into its pruned
// base (the projection as it stood at point) and deletes them, in tx: the
// events stay replayable from the base, the live projection is untouched.
func pruneGroup(tx *bolt.Tx, id string, point, cursor uint64) error {
	gb := tx.Bucket(bktGroups).Bucket([]byte(id))
	meta, inbox := gb.Bucket(bktMeta), gb.Bucket(bktInbox)
	base := getU64(meta.Get(keyBase))
	st, err := baseState(gb, id)
	if err != nil {
		return err
	}
	pb, existed := gb.Bucket(bktPruned), gb.Bucket(bktPruned) != nil
	ov := newOverlay(st)
	if !existed {
		// The first base holds everything the snapshot (if any) held.
		if pb, err = gb.CreateBucket(bktPruned); err != nil {
			return err
		}
		ov = newOverlay(newGroupState(id))
		start := change{items: sortedItems(st), members: sortedMembers(st.members)}
		if meta.Get(keySnapshot) != nil {
			start.mission = &st.mis
		}
		ov.record(start)
	}
	ov.private = true
	next, err := replayInboxTo(inbox, id, base+1, point, ov)
	if err != nil {
		return fmt.Errorf("queue: prune group %s: %w", id, err)
	}
	if next-1 != point {
		return fmt.Errorf("queue: prune group %s: inbox ends at %d, below %d", id, next-1, point)
	}
	items, err := pb.CreateBucketIfNotExists(bktPrunedItem)
	if err != nil {
		return err
	}
	if err := writeProjection(pb, items, ov); err != nil {
		return err
	}
	if err := pb.Put(keySequence, u64(point)); err != nil {
		return err
	}
	if err := pb.Put(keyProjection, u64(ProjectionVersion)); err != nil {
		return err
	}
	if err := keepRecent(pb, inbox, base, point, cursor); err != nil {
		return err
	}
	c := inbox.Cursor()
	for k, _ := c.Seek(u64(base + 1)); k != nil && getU64(k) <= point; k, _ = c.Seek(u64(base + 1)) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	// A restored snapshot is read for contracts at or below its
	// sequence only; once pruned past, no live entry names it.
	if snapSeq := snapshotSequence(meta); snapSeq > 0 && snapSeq <= point {
		if err := meta.Delete(keySnapshot); err != nil {
			return err
		}
	}
	return meta.Put(keyBase, u64(point))
}

// snapshotSequence is the sequence of the restored snapshot meta names (0
// for none).
func snapshotSequence(meta *bolt.Bucket) uint64 {
	v := meta.Get(keySnapshotRef)
	if v == nil || meta.Get(keySnapshot) == nil {
		return 0
	}
	var ref struct {
		Sequence uint64 `json:"sequence"`
	}
	if json.Unmarshal(v, &ref) != nil {
		return 0
	}
	return ref.Sequence
}

// baseState is the projection the Group's inbox replays over: its pruned
// base, else its restored snapshot, else empty. cursor and base are left
// for the caller.
func baseState(gb *bolt.Bucket, id string) (*groupState, error) {
	meta := gb.Bucket(bktMeta)
	if pb := gb.Bucket(bktPruned); pb != nil {
		return loadPruned(pb, id)
	}
	g := newGroupState(id)
	if raw := meta.Get(keySnapshot); raw != nil {
		var snap protocol.GroupSnapshot
		if err := json.Unmarshal(raw, &snap); err != nil {
			return nil, fmt.Errorf("group %s snapshot: %w", id, err)
		}
		g = snapshotState(&snap)
	}
	return g, nil
}

// hasBaseMission reports whether the base the Group replays over names
// its Mission (a stored mission key, as Apply would have written).
func hasBaseMission(gb *bolt.Bucket) bool {
	if pb := gb.Bucket(bktPruned); pb != nil {
		return pb.Get(keyMission) != nil
	}
	return gb.Bucket(bktMeta).Get(keySnapshot) != nil
}

// loadPruned reads a pruned base.
func loadPruned(pb *bolt.Bucket, id string) (*groupState, error) {
	if v := getU64(pb.Get(keyProjection)); v != ProjectionVersion {
		return nil, fmt.Errorf("group %s: pruned base projected by version %d, this build projects %d", id, v, ProjectionVersion)
	}
	g := newGroupState(id)
	if v := pb.Get(keyMission); v != nil {
		if err := unmarshal(v, &g.mis); err != nil {
			return nil, fmt.Errorf("group %s pruned mission: %w", id, err)
		}
	}
	if v := pb.Get(keyMembers); v != nil {
		var ms []Member
		if err := json.Unmarshal(v, &ms); err != nil {
			return nil, fmt.Errorf("group %s pruned members: %w", id, err)
		}
		for _, m := range ms {
			g.members[memberKey(m.Principal)] = m
		}
	}
	if items := pb.Bucket(bktPrunedItem); items != nil {
		if err := items.ForEach(func(k, v []byte) error {
			e := new(Entry)
			if err := e.UnmarshalJSON(v); err != nil {
				return fmt.Errorf("group %s pruned item %s: %w", id, k, err)
			}
			g.items[e.WorkItemID] = e
			return nil
		}); err != nil {
			return nil, err
		}
	}
	for _, id := range g.itemIDs() {
		g.index(g.items[id])
	}
	return g, nil
}

// prunedVersion is the projection version of the Group's pruned base, and
// whether it has one.
func prunedVersion(gb *bolt.Bucket) (uint64, bool) {
	pb := gb.Bucket(bktPruned)
	if pb == nil {
		return 0, false
	}
	return getU64(pb.Get(keyProjection)), true
}

// resetPrunedElsewhere empties every Group whose pruned base another build
// projected: the events folded into it are gone, so this build cannot
// project them its way. The Group is read again from the authority (its
// log, or its signed snapshot), as after `resync`.
func (s *Store) resetPrunedElsewhere() error {
	var stale []string
	if err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bktGroups).ForEachBucket(func(name []byte) error {
			if v, ok := prunedVersion(tx.Bucket(bktGroups).Bucket(name)); ok && v != ProjectionVersion {
				stale = append(stale, string(name))
			}
			return nil
		})
	}); err != nil {
		return err
	}
	for _, id := range stale {
		if _, err := s.ResetGroup(id); err != nil {
			return err
		}
	}
	return nil
}

// keepRecent keeps, in the pruned base, the eventIds of the events about
// to be pruned (base+1…point) that the window of RecentEventIDs still
// covers at cursor, so Open refills the window whole (fillRecent).
func keepRecent(pb, inbox *bolt.Bucket, base, point, cursor uint64) error {
	from := uint64(1)
	if cursor >= RecentEventIDs {
		from = cursor - RecentEventIDs + 1
	}
	prev, err := prunedRecent(pb)
	if err != nil {
		return err
	}
	kept := make([]recentRef, 0, len(prev))
	for _, r := range prev {
		if r.Seq >= from {
			kept = append(kept, r)
		}
	}
	c := inbox.Cursor()
	for k, v := c.Seek(u64(max(base+1, from))); k != nil && getU64(k) <= point; k, v = c.Next() {
		kept = append(kept, recentRef{ID: storedEventID(v), Seq: getU64(k)})
	}
	raw, err := json.Marshal(kept)
	if err != nil {
		return err
	}
	return pb.Put(keyRecent, raw)
}

// prunedRecent reads the eventIds a pruned base kept for the window, in
// sequence order (none without a pruned base).
func prunedRecent(pb *bolt.Bucket) ([]recentRef, error) {
	if pb == nil {
		return nil, nil
	}
	v := pb.Get(keyRecent)
	if v == nil {
		return nil, nil
	}
	var out []recentRef
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, fmt.Errorf("pruned recent ids: %w", err)
	}
	return out, nil
}
