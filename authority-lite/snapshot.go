package authoritylite

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// Snapshots bound the online log (spec 16): Compact writes a signed Group
// Snapshot at the current sequence into DIR/snapshots (content-addressed,
// outside the log), appends group.snapshot.created, and deletes the events
// older than the retention. A subscriber behind the online log gets
// CURSOR_TOO_OLD with the snapshot's reference, restores it, and continues
// from its sequence.

var (
	keyFirst    = []byte("first")    // lowest sequence still online
	keySnapshot = []byte("snapshot") // JSON SnapshotRef of the latest snapshot
)

// Compact snapshots a Group at its current sequence and keeps only the
// last retain events online. It returns the snapshot's reference.
func (s *Service) Compact(groupID string, retain uint64) (protocol.SnapshotRef, error) {
	gs := s.group(groupID)
	if gs == nil {
		return protocol.SnapshotRef{}, protocol.Errorf(protocol.CodeGroupNotFound, "group %s not found", groupID)
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	now := s.clock.Now()
	last := gs.last
	snap, doc, err := s.buildSnapshot(gs, now)
	if err != nil {
		return protocol.SnapshotRef{}, err
	}
	ref := protocol.SnapshotRef{SnapshotID: snap.SnapshotID, GroupID: groupID, Sequence: last, Digest: protocol.Digest(doc)}
	ref.URI = "mwp-snapshot:" + ref.Digest
	if err := s.snaps.write(ref.Digest, doc); err != nil {
		return protocol.SnapshotRef{}, err
	}
	c := &call{s: s, cmd: &protocol.Command{ActionID: ref.SnapshotID, Actor: group.AuthorityActor, CorrelationID: ref.SnapshotID}, now: now, automatic: true}
	p := &pending{now: protocol.NewTime(now), drafts: []group.EventDraft{{Type: protocol.EvtGroupSnapshotCreated,
		Aggregate: protocol.Aggregate{Kind: protocol.AggregateGroup, ID: groupID}, Revision: last + 1, Actor: group.AuthorityActor,
		Payload: &group.SnapshotCreated{Snapshot: ref, Reason: "retention"}}}}
	if _, err := s.commitNow(c, gs, p); err != nil {
		return protocol.SnapshotRef{}, err
	}
	cut := uint64(0)
	if last > retain {
		cut = last - retain
	}
	if err := s.dropThrough(gs, cut, ref); err != nil {
		return protocol.SnapshotRef{}, err
	}
	return ref, nil
}

// dropThrough deletes the Group's events up to cut and records ref as the
// snapshot a reader behind restores; the events about to go are folded
// into the records first. The online log never grows back: a cut below
// the first online event keeps it. The caller holds gs.mu.
//
// A snapshot's file goes with the last thing that names it: once neither
// an online event (its group.snapshot.created) nor the Group's current
// reference does (supersededSnapshots), it is deleted after the commit.
func (s *Service) dropThrough(gs *groupState, cut uint64, ref protocol.SnapshotRef) error {
	cut = max(cut, gs.first-1)
	rec := &recorder{}
	if err := gs.checkpoint(rec, gs.last); err != nil {
		s.writer.fail(err)
		return protocol.Errorf(protocol.CodeInternalError, "encode state: %v", err)
	}
	var gone []string
	err := s.applyRecords(gs.id, rec, func(gb *groupBuckets) error {
		var announced []protocol.SnapshotRef
		cur := gb.events.Cursor()
		for k, v := cur.First(); k != nil && seqFromKey(k) <= cut; k, v = cur.First() {
			if r, ok := announcedSnapshot(v); ok {
				announced = append(announced, r)
			}
			if err := cur.Delete(); err != nil {
				return err
			}
		}
		if err := gb.meta.Put(keyFirst, seqKey(cut+1)); err != nil {
			return err
		}
		var prev *protocol.SnapshotRef
		var p protocol.SnapshotRef
		if ok, _ := getJSON(gb.meta, keySnapshot, &p); ok {
			prev = &p
		}
		gone = supersededSnapshots(prev, announced, ref, cut)
		if err := markGone(gb.tx, gone); err != nil {
			return err
		}
		return putJSON(gb.meta, keySnapshot, ref)
	})
	if err != nil {
		return err
	}
	gs.tail.drop(cut)
	gs.first = cut + 1
	s.snaps.removeGone(gone)
	return nil
}

// supersededSnapshots are the digests of the snapshots nothing names once
// the events through cut are gone and cur is the Group's reference: those
// announced by the deleted events, and the previous reference prev when
// its own announcement (at its sequence + 1) is gone too; never cur.
func supersededSnapshots(prev *protocol.SnapshotRef, announced []protocol.SnapshotRef, cur protocol.SnapshotRef, cut uint64) []string {
	var out []string
	add := func(r protocol.SnapshotRef) {
		if r.Digest != "" && r.Digest != cur.Digest && !slices.Contains(out, r.Digest) {
			out = append(out, r.Digest)
		}
	}
	for _, r := range announced {
		add(r)
	}
	if prev != nil && prev.Sequence+1 <= cut {
		add(*prev)
	}
	return out
}

// announcedSnapshot is the snapshot a stored event announces, when it is
// a group.snapshot.created.
func announcedSnapshot(raw []byte) (protocol.SnapshotRef, bool) {
	if !bytes.Contains(raw, []byte(protocol.EvtGroupSnapshotCreated)) {
		return protocol.SnapshotRef{}, false
	}
	var ev struct {
		Type    protocol.EventType    `json:"type"`
		Payload group.SnapshotCreated `json:"payload"`
	}
	if json.Unmarshal(raw, &ev) != nil || ev.Type != protocol.EvtGroupSnapshotCreated {
		return protocol.SnapshotRef{}, false
	}
	return ev.Payload.Snapshot, true
}

func (s *snapshotFiles) path(digest string) (string, error) {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if _, err := hex.DecodeString(h); !ok || err != nil || len(h) != 64 {
		return "", protocol.Errorf(protocol.CodeInvalidCommand, "snapshot digest %q is not sha256:<64 hex>", digest)
	}
	return filepath.Join(s.dir, "snapshots", h+".json"), nil
}

func (s *snapshotFiles) write(digest string, doc []byte) error {
	path, err := s.path(digest)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, doc, 0o600)
}

// Snapshot returns a stored snapshot document after checking its digest.
func (s *Service) Snapshot(ref protocol.SnapshotRef) ([]byte, error) {
	path, err := s.snaps.path(ref.Digest)
	if err != nil {
		return nil, err
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, protocol.Errorf(protocol.CodeInvalidCommand, "snapshot %s is not stored here", ref.Digest)
		}
		return nil, err
	}
	if protocol.Digest(doc) != ref.Digest {
		return nil, fmt.Errorf("snapshot store: %s is corrupt", ref.Digest)
	}
	return doc, nil
}

// onlineFrom returns the lowest online sequence and the latest snapshot.
func onlineFrom(gb *groupBuckets) (uint64, *protocol.SnapshotRef) {
	first := uint64(1)
	if v := gb.meta.Get(keyFirst); len(v) == 8 {
		first = seqFromKey(v)
	}
	var ref protocol.SnapshotRef
	if ok, _ := getJSON(gb.meta, keySnapshot, &ref); ok {
		return first, &ref
	}
	return first, nil
}

// cursorTooOld is the answer to a read from before the online log.
func cursorTooOld(groupID string, after, first uint64, ref *protocol.SnapshotRef) *protocol.Error {
	e := protocol.Errorf(protocol.CodeCursorTooOld, "group %s keeps events from %d online; position %d is older: restore the snapshot", groupID, first, after)
	// firstSequence (ours): a client that asked for events it already holds
	// (the overlap below its cursor) subscribes again from there.
	e = protocol.WithDetails(e, "firstSequence", first)
	if ref != nil {
		e = protocol.WithDetails(e, "snapshot", ref)
	}
	return e
}

// buildSnapshot signs the Group's state at its last sequence. The caller
// holds the Group's lock.
func (s *Service) buildSnapshot(gs *groupState, now time.Time) (*protocol.GroupSnapshot, []byte, error) {
	groupID := gs.id
	last := gs.last
	// Every write queued before this point must be on disk to be read.
	if err := <-s.writer.submit(func(logstore.Tx) error { return nil }); err != nil {
		return nil, nil, protocol.Errorf(protocol.CodeInternalError, "flush: %v", err)
	}
	var lastID string
	_ = s.scanEvents(groupID, last-1, func(ev *protocol.Event, _ []byte) bool { lastID = ev.EventID; return false })
	if gs.g.Mission == nil || last == 0 || lastID == "" {
		return nil, nil, protocol.Errorf(protocol.CodeInvalidStateTransition, "group %s has nothing to snapshot", groupID)
	}
	snap := protocol.GroupSnapshot{
		SnapshotID: "snap-" + groupID + "-" + fmt.Sprint(last), GroupID: groupID, Sequence: last, LastEventID: lastID,
		CreatedAt: protocol.NewTime(now), CreatedBy: s.cfg.ID, Mission: *gs.g.Mission,
		Memberships: protocol.List[protocol.Membership]{}, WorkItems: protocol.List[protocol.WorkItem]{},
		Approvals: protocol.List[protocol.Approval]{}, Artifacts: protocol.List[string]{},
	}
	keys := make([]string, 0, len(gs.members))
	for k := range gs.members {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		snap.Memberships = append(snap.Memberships, *gs.members[k])
	}
	for _, id := range slices.Sorted(maps.Keys(gs.g.Items)) {
		w := gs.g.Items[id]
		snap.WorkItems = append(snap.WorkItems, w.WorkItem)
		if w.ExecutionApproval != nil {
			snap.Approvals = append(snap.Approvals, *w.ExecutionApproval)
		}
	}
	policy, err := protocol.Marshal(gs.grants)
	if err != nil {
		return nil, nil, err
	}
	snap.PolicyLogDigest = protocol.Digest(policy)
	snap.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: s.key.KeyID, CreatedAt: snap.CreatedAt}
	doc, err := protocol.SignedValue(snap, s.key)
	if err != nil {
		return nil, nil, err
	}
	return &snap, doc, nil
}

// SnapshotDocument signs a snapshot of the Group as it is now, for an
// Organization policy actor to archive it with group_archive.
func (s *Service) SnapshotDocument(groupID string) (protocol.GroupSnapshot, error) {
	gs := s.group(groupID)
	if gs == nil {
		return protocol.GroupSnapshot{}, protocol.Errorf(protocol.CodeGroupNotFound, "group %s not found", groupID)
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	snap, doc, err := s.buildSnapshot(gs, s.clock.Now())
	if err != nil {
		return protocol.GroupSnapshot{}, err
	}
	var out protocol.GroupSnapshot
	if err := json.Unmarshal(doc, &out); err != nil {
		return protocol.GroupSnapshot{}, err
	}
	_ = snap
	return out, nil
}

// archive decides ext…group_archive (spec 15.2): an Organization policy
// actor submits a snapshot the authority signed at the Group's current
// sequence, whose policy-log digest matches; group.snapshot.created and
// group.archived are appended together and the Group takes no more
// commands. Only a Group whose Mission is terminal is archived.
func (s *Service) archive(c *call, gs *groupState, p *pending) error {
	pl := c.payload.(*protocol.ArchiveGroupPayload)
	if c.cmd.Actor.Kind != protocol.ActorService {
		return protocol.Forbidden("a Group is archived by an Organization policy actor")
	}
	m := gs.g.Mission
	if m == nil || !slices.Contains(protocol.Commands[c.cmd.Type].MissionFrom, m.State) {
		return protocol.InvalidTransition("group %s: its Mission is not terminal", gs.id)
	}
	snap := pl.Snapshot
	raw, err := protocol.Marshal(snap)
	if err != nil {
		return protocol.InvalidCommand("snapshot: %v", err).At("/payload/snapshot")
	}
	doc, _ := protocol.Parse(raw, protocol.DecodeOptions{MaxBytes: 1 << 30})
	if err := protocol.Verify(doc.(map[string]any), protocol.NewKeySet(s.key.Public())); err != nil {
		return protocol.Errorf(protocol.CodeAuthInvalidSignature, "snapshot is not signed by this authority: %v", err).At("/payload/snapshot/signature")
	}
	if snap.GroupID != gs.id || snap.Sequence != gs.last {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeRevisionConflict, "snapshot is of %s at %d; the Group is at %d", snap.GroupID, snap.Sequence, gs.last).At("/payload/snapshot/sequence"), "sequence", gs.last)
	}
	policy, err := protocol.Marshal(gs.grants)
	if err != nil || protocol.Digest(policy) != snap.PolicyLogDigest {
		return protocol.InvalidCommand("snapshot policy-log digest does not match the Group's policy log").At("/payload/snapshot/policyLogDigest")
	}
	ref := protocol.SnapshotRef{SnapshotID: snap.SnapshotID, GroupID: gs.id, Sequence: snap.Sequence, Digest: protocol.Digest(raw)}
	ref.URI = "mwp-snapshot:" + ref.Digest
	if err := s.snaps.write(ref.Digest, raw); err != nil {
		return protocol.Errorf(protocol.CodeInternalError, "store snapshot: %v", err)
	}
	agg := protocol.Aggregate{Kind: protocol.AggregateGroup, ID: gs.id}
	gs.archived = true
	gs.archiveRef = &ref
	p.archived = true
	p.drafts = append(p.drafts,
		group.EventDraft{Type: protocol.EvtGroupSnapshotCreated, Aggregate: agg, Revision: gs.last + 1, Actor: c.cmd.Actor, Payload: &group.SnapshotCreated{Snapshot: ref, Reason: "archive"}},
		group.EventDraft{Type: protocol.EvtGroupArchived, Aggregate: agg, Revision: gs.last + 2, Actor: c.cmd.Actor, Payload: &group.GroupArchived{Snapshot: ref, Reason: pl.Reason}})
	return nil
}
