package authoritylite

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Archiving bounds what the authority holds for finished work.
//
// With Config.ArchiveAfter set, the authority acts as the Organization
// policy actor (service:<ID>, its own key): every archiveScanEvery it
// archives, with the core group_archive command through the ordinary
// pipeline, each Group whose Mission is terminal, whose WorkItems are all
// terminal, and whose last event is ArchiveAfter old. An archived Group
// takes no more commands (decideInGroup). Once its group.archived is
// durable its events before the archive snapshot are deleted when
// retention is on (readers behind get CURSOR_TOO_OLD with that snapshot),
// its WorkItem, proposal and lease records are deleted (the snapshot holds
// the WorkItems), and its decision state is released: the store and
// memory keep a stub (Mission, members, usage, artifact revisions,
// sequences). Open loads archived Groups as stubs too. A read that needs
// the WorkItems loads them back from the archive snapshot (ensureLoaded).
// Its receipts, and with Config.PurgeAfter the whole Group, go later
// (purge.go).

// archiveScanEvery is how often the archiver looks for Groups to archive.
func archiveScanEvery(after time.Duration) time.Duration {
	return min(max(after/4, time.Second), time.Minute)
}

// finished reports whether a Group's work is over: its Mission terminal
// and every WorkItem terminal. The archiver archives only such Groups.
func finished(g *group.Group) bool {
	if g.Mission == nil || !g.Mission.State.Terminal() {
		return false
	}
	for _, w := range g.Items {
		if !w.State.Terminal() {
			return false
		}
	}
	return true
}

// archiveDue reports whether a finished Group whose last event occurred
// at lastAt is due for archiving at now.
func archiveDue(lastAt, now time.Time, after time.Duration) bool {
	return !now.Before(lastAt.Add(after))
}

// startArchiver runs the archiver until ctx ends; done is closed then.
func (s *Service) startArchiver() error {
	if s.cfg.ArchiveAfter <= 0 {
		return nil
	}
	if !s.org.isPolicyService(s.cfg.ID) {
		if err := s.AddPrincipal(protocol.ActorService, s.cfg.ID, s.key.Public()); err != nil {
			return fmt.Errorf("authority: register the archiver: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.archiver.cancel, s.archiver.done = cancel, make(chan struct{})
	go func() {
		defer close(s.archiver.done)
		for {
			t := newTimer(s.clock, archiveScanEvery(s.cfg.ArchiveAfter))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			s.ArchiveDue(ctx)
		}
	}()
	return nil
}

func (s *Service) stopArchiver() {
	if s.archiver.cancel != nil {
		s.archiver.cancel()
		<-s.archiver.done
	}
}

// archiver is the state of the archiving loop: the last event time of
// each finished Group seen, read once per sequence.
type archiver struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex // one scan at a time
	seen   map[string]lastEvent
}

type lastEvent struct {
	seq uint64
	at  time.Time
}

// ArchiveDue archives every Group due now and returns their ids; one that
// fails (a command came in between) is tried again at the next scan.
func (s *Service) ArchiveDue(ctx context.Context) []string {
	if s.cfg.ArchiveAfter <= 0 {
		return nil
	}
	s.archiver.mu.Lock()
	defer s.archiver.mu.Unlock()
	now := s.clock.Now()
	var out []string
	for _, id := range s.GroupIDs() {
		if ctx.Err() != nil {
			break
		}
		gs := s.rawGroup(id)
		if gs == nil || gs.stub.Load() || s.integrity.damage(id) != nil {
			continue
		}
		gs.mu.Lock()
		due := !gs.archived && finished(gs.g)
		last := gs.last
		gs.mu.Unlock()
		if !due {
			delete(s.archiver.seen, id)
			continue
		}
		le, ok := s.archiver.seen[id]
		if !ok || le.seq != last {
			le = lastEvent{seq: last}
			_ = s.scanEvents(id, last-1, func(ev *protocol.Event, _ []byte) bool { le.at = ev.OccurredAt.Time; return false })
			if le.at.IsZero() {
				continue
			}
			if s.archiver.seen == nil {
				s.archiver.seen = map[string]lastEvent{}
			}
			s.archiver.seen[id] = le
		}
		if !archiveDue(le.at, now, s.cfg.ArchiveAfter) {
			continue
		}
		if err := s.archiveGroup(ctx, id); err != nil {
			s.log.Info("archive deferred", "group", id, "err", err)
			continue
		}
		delete(s.archiver.seen, id)
		out = append(out, id)
	}
	if ctx.Err() == nil {
		s.sweepReleased(s.clock.Now())
	}
	return out
}

// archiveGroup submits group_archive for a Group as the Organization
// policy actor.
func (s *Service) archiveGroup(ctx context.Context, id string) error {
	snap, err := s.SnapshotDocument(id)
	if err != nil {
		return err
	}
	p := s.Principal(protocol.Actor{Kind: protocol.ActorService, ID: s.cfg.ID}, s.key)
	_, err = p.Do(ctx, protocol.CmdGroupArchive, id, &protocol.ArchiveGroupPayload{Snapshot: snap,
		Reason: fmt.Sprintf("finished: its Mission and every WorkItem terminal for %s", s.cfg.ArchiveAfter)})
	return err
}

// afterArchive runs once a Group's group.archived is durable: with
// retention on, its events before the archive snapshot go; its decision
// records go too (the archive snapshot holds its WorkItems), and its state
// is released. Its receipts go later (purge.go).
func (s *Service) afterArchive(gs *groupState) {
	defer s.memberNotice.notify() // MemberGroups leaves it out now
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if s.integrity.damage(gs.id) != nil || gs.stub.Load() {
		return
	}
	ref := gs.archiveRef
	if ref != nil && s.retentionOn() && ref.Sequence >= gs.first {
		if err := s.dropThrough(gs, ref.Sequence, *ref); err != nil {
			s.log.Error("dropping an archived Group's history failed", "group", gs.id, "err", err)
			return
		}
	}
	// The records at the last event, and the Group in the index of
	// released Groups, which the next Open leaves unread.
	rec := &recorder{}
	if err := gs.checkpoint(rec, gs.last); err != nil {
		s.log.Error("checkpoint of an archived Group failed", "group", gs.id, "err", err)
		return
	}
	// Its receipts stay until no retry can come (purge.go); with retention
	// off they stay for good.
	now := s.clock.Now()
	if err := s.applyRecords(gs.id, rec, func(gb *groupBuckets) error {
		if err := clearDecisionRecords(gb, gs.id); err != nil {
			return err
		}
		if s.retentionOn() {
			if err := scheduleGroupReceipts(gb.tx, gs.id, now.Add(s.receiptWindow())); err != nil {
				return err
			}
		}
		return gb.tx.Bucket(bucketReleased).Put([]byte(gs.id), binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano())))
	}); err != nil {
		s.log.Error("checkpoint of an archived Group failed", "group", gs.id, "err", err)
		return
	}
	if s.cfg.PurgeAfter > 0 {
		s.released.note(gs.id, now)
	}
	gs.release(s.cfg.Limits)
}

// releaseArchived releases, at Open, every Group whose group.archived is
// durable but whose release is not (the process ended between the two
// commits; such a Group is not in the released index). afterArchive runs
// only after the archive's commit and the archiver skips archived Groups,
// so nothing else would drop its records, schedule its receipts or note
// it for purge. Open may have loaded it as a stub (its state was
// checkpointed at its last event, at Close or before the crash): its whole
// state is read back first, so that the release does the store part too.
func (s *Service) releaseArchived() {
	for _, id := range s.GroupIDs() {
		gs := s.rawGroup(id)
		// A placeholder is in the released index: released already.
		if gs == nil || gs.lazy.Load() || s.integrity.damage(id) != nil {
			continue
		}
		gs.mu.Lock()
		archived := gs.archived
		gs.mu.Unlock()
		if !archived {
			continue
		}
		s.log.Info("releasing an archived Group left unreleased", "group", id)
		s.ensureLoaded(gs)
		s.afterArchive(gs)
	}
}

// clearDecisionRecords deletes what a released Group no longer needs on
// disk: its WorkItem, proposal and lease records and its grants, leases
// and Context Package heads. Its archive snapshot holds its WorkItems
// (archivedItems reads them back); meta keeps what the stub and a
// subscription need: Mission, members, usage, artifact revisions,
// descendants, first sequence, snapshot reference, stateSeq, archived.
// Its receipts go by the time rule (pruneReceipts).
func clearDecisionRecords(gb *groupBuckets, groupID string) error {
	g := gb.tx.Bucket(bucketGroups).Bucket([]byte(groupID))
	for _, name := range [][]byte{bucketItems, bucketProposals, bucketLeases} {
		if g.Bucket(name) == nil {
			continue
		}
		if err := g.DeleteBucket(name); err != nil {
			return err
		}
		if bytes.Equal(name, bucketLeases) {
			continue
		}
		if _, err := g.CreateBucket(name); err != nil {
			return err
		}
	}
	for _, k := range [][]byte{keyGrants, keyLeases, keyContexts} {
		if err := gb.meta.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// archivedItems reads a released Group's WorkItems (and their execution
// approvals) from its archive snapshot, where they went when their
// records were deleted.
func (s *Service) archivedItems(ref *protocol.SnapshotRef) (map[string]*group.WorkItem, error) {
	doc, err := s.Snapshot(*ref)
	if err != nil {
		return nil, err
	}
	var snap protocol.GroupSnapshot
	if err := json.Unmarshal(doc, &snap); err != nil {
		return nil, fmt.Errorf("archive snapshot %s: %v", ref.Digest, err)
	}
	approvals := map[string]protocol.Approval{}
	for _, a := range snap.Approvals {
		approvals[a.WorkItemID] = a
	}
	out := make(map[string]*group.WorkItem, len(snap.WorkItems))
	for _, w := range snap.WorkItems {
		it := &group.WorkItem{WorkItem: w}
		if a, ok := approvals[w.WorkItemID]; ok {
			it.ExecutionApproval = &a
		}
		out[w.WorkItemID] = it
	}
	return out, nil
}

func (s *Service) retentionOn() bool { return s.cfg.RetainEvents > 0 }

// applyRecords writes rec into the Group's buckets, then fn in the same
// transaction.
func (s *Service) applyRecords(groupID string, rec *recorder, fn func(*groupBuckets) error) error {
	err := <-s.writer.submit(func(tx logstore.Tx) error {
		gb, err := openGroupBuckets(tx, groupID, false)
		if err != nil || gb == nil {
			return fmt.Errorf("group %s buckets: %v", groupID, err)
		}
		if err := rec.apply(gb); err != nil {
			return err
		}
		if fn != nil {
			return fn(gb)
		}
		return nil
	})
	if err != nil {
		return protocol.Errorf(protocol.CodeInternalError, "write group %s: %v", groupID, err)
	}
	return nil
}

// release drops an archived Group's decision state from memory, keeping
// what reads without it need. The caller holds gs.mu, and the records are
// checkpointed at gs.last.
func (gs *groupState) release(lim group.Limits) {
	g := group.NewGroup(gs.id, lim)
	g.Mission, g.Ancestors = gs.g.Mission, gs.g.Ancestors
	gs.g = g
	gs.usage, gs.msgs, gs.grants = map[string]protocol.Usage{}, nil, map[string]*grantRecord{}
	gs.leases, gs.openLeases = map[string]*leaseRecord{}, map[string][]*leaseRecord{}
	gs.counts = newItemCounts()
	gs.saved = newSavedState()
	gs.saved.seq, gs.saved.mission = gs.last, g.Mission
	gs.tail.drop(gs.last)
	gs.stub.Store(true)
}

// ensureLoaded reads back the whole state of a released Group.
func (s *Service) ensureLoaded(gs *groupState) {
	if gs == nil || !gs.stub.Load() {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if !gs.stub.Load() {
		return
	}
	var full *groupState
	err := s.integrity.view(gs.id, func(tx logstore.Tx) error {
		var err error
		full, _, err = s.readGroup(tx, gs.id)
		return err
	})
	if err == nil && len(full.g.Items) == 0 && full.archiveRef != nil {
		var items map[string]*group.WorkItem
		if items, err = s.archivedItems(full.archiveRef); err == nil {
			full.g.Items = items
			full.counts.count(items)
		}
	}
	if err != nil {
		if s.integrity.damage(gs.id) == nil {
			s.integrity.mark(gs.id, err)
		}
		return
	}
	gs.g, gs.members, gs.usage, gs.msgs, gs.grants = full.g, full.members, full.usage, nil, full.grants
	gs.leases, gs.openLeases, gs.counts, gs.artifacts = full.leases, full.openLeases, full.counts, full.artifacts
	gs.descendants, gs.saved, gs.missionID = full.descendants, full.saved, full.missionID
	gs.stub.Store(false)
}

// bucketReleased is the root index of the Groups archived and released:
// groupId -> empty. Open makes each a placeholder without reading it; the
// background, or the first access, reads its stub (fillStub).
var bucketReleased = []byte("released")

// placeholder is a released Group not read yet.
func placeholder(id string) *groupState {
	gs := &groupState{id: id, changed: make(chan struct{}), archived: true}
	gs.stub.Store(true)
	gs.lazy.Store(true)
	return gs
}

// fillStub reads a placeholder's stub.
func (s *Service) fillStub(gs *groupState) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if !gs.lazy.Load() {
		return
	}
	err := s.integrity.view(gs.id, func(tx logstore.Tx) error {
		gb, err := openGroupBuckets(tx, gs.id, false)
		if err != nil || gb == nil {
			return fmt.Errorf("buckets: %v", err)
		}
		full, err := s.readStub(gb, gs.id)
		if err != nil {
			return err
		}
		gs.g, gs.members, gs.usage, gs.grants, gs.leases, gs.openLeases = full.g, full.members, full.usage, full.grants, full.leases, full.openLeases
		gs.counts, gs.artifacts, gs.descendants, gs.missionID, gs.saved = full.counts, full.artifacts, full.descendants, full.missionID, full.saved
		gs.last, gs.first, gs.archiveRef = full.last, full.first, full.archiveRef
		gs.tail.last.Store(gs.last)
		return nil
	})
	if err != nil {
		if s.integrity.damage(gs.id) == nil {
			s.integrity.mark(gs.id, err)
		}
		// Damaged: it answers STORE_DAMAGED; an empty state stands in.
		full := newGroupState(gs.id, s.cfg.Limits)
		gs.g, gs.members, gs.usage, gs.grants, gs.leases, gs.openLeases = full.g, full.members, full.usage, full.grants, full.leases, full.openLeases
		gs.counts, gs.artifacts, gs.saved = full.counts, full.artifacts, full.saved
	}
	gs.lazy.Store(false)
	s.unread.Add(-1)
}

// fillStubs reads every placeholder's stub.
func (s *Service) fillStubs(ctx context.Context) {
	for _, id := range s.GroupIDs() {
		if ctx.Err() != nil {
			return
		}
		s.peekGroup(id) // nil once purged
	}
}

// readStub reads what memory keeps of an archived Group.
func (s *Service) readStub(gb *groupBuckets, id string) (*groupState, error) {
	gs := newGroupState(id, s.cfg.Limits)
	var mission missionRecord
	if _, err := getJSON(gb.meta, keyMission, &mission); err != nil {
		return nil, err
	}
	gs.g.Mission, gs.g.Ancestors = mission.Mission, mission.Ancestors
	if gs.g.Mission != nil {
		gs.missionID = gs.g.Mission.MissionID
	}
	for _, f := range []struct {
		key []byte
		v   any
	}{{keyDescendants, &gs.descendants}, {keyArtifacts, &gs.artifacts}, {keyMembers, &gs.members}} {
		if _, err := getJSON(gb.meta, f.key, f.v); err != nil {
			return nil, err
		}
	}
	if gs.artifacts == nil {
		gs.artifacts = map[string]uint64{}
	}
	if gs.members == nil {
		gs.members = map[string]*protocol.Membership{}
	}
	gs.last = lastSeq(gb.events)
	gs.tail.last.Store(gs.last)
	gs.first, gs.archiveRef = onlineFrom(gb)
	gs.archived = true
	gs.saved.seq, gs.saved.mission = gs.last, gs.g.Mission
	gs.stub.Store(true)
	return gs, nil
}

// stubbable reports whether Open may load a Group as a stub: archived,
// with its records checkpointed at its last event.
func stubbable(gb *groupBuckets) bool {
	v := gb.meta.Get(keyStateSeq)
	return gb.meta.Get(keyArchived) != nil && len(v) == 8 && seqFromKey(v) >= lastSeq(gb.events)
}

// Released reports whether a Group is archived and released: its
// group.archived durable and everything after it done (history and
// receipts dropped with retention on, state checkpointed, memory a stub).
func (s *Service) Released(groupID string) bool {
	gs := s.rawGroup(groupID)
	return gs != nil && gs.stub.Load()
}
