package authoritylite

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// defaultCheckpointEvery is how many events may pass before a commit also
// rewrites the Group's changed Mission, WorkItem and proposal records. It
// bounds what Open folds again after a crash (a clean Close checkpoints
// everything); between checkpoints a commit writes its events and no
// decision-state record, so a WorkItem touched by seven events in a row is
// written once, not seven times.
const defaultCheckpointEvery = 512

// keyContexts is the meta value holding the current version of every
// Context Package of the Group (group.Group.Contexts), part of the
// checkpoint like the Mission record.
var keyContexts = []byte("contexts")

// savedState is what the store's Mission, WorkItem and proposal records
// hold: the Group's decision state as of sequence seq. Values reachable
// from a group.Group are replaced, never edited in place, so a record
// whose pointer is unchanged is unchanged; an id an event named is
// rewritten anyway, as the records were before checkpoints.
type savedState struct {
	seq       uint64
	items     map[string]*group.WorkItem
	proposals map[string]*group.Proposal
	mission   *protocol.Mission
	contexts  map[string]*group.ContextHead
	// named are the aggregate ids events named since seq; missionNamed is
	// set when one of them was the Mission.
	named        map[string]bool
	missionNamed bool
}

func newSavedState() savedState {
	return savedState{items: map[string]*group.WorkItem{}, proposals: map[string]*group.Proposal{}, named: map[string]bool{}}
}

func (s *Service) checkpointEvery() uint64 {
	if s.cfg.checkpointEvery > 0 {
		return s.cfg.checkpointEvery
	}
	return defaultCheckpointEvery
}

// note remembers what events name for the next checkpoint.
func (sv *savedState) note(events []sealed) {
	for _, e := range events {
		if a := e.ev.Aggregate; a != nil {
			sv.named[a.ID] = true
			if a.Kind == protocol.AggregateMission {
				sv.missionNamed = true
			}
		}
	}
}

// checkpoint records into rec every Mission, WorkItem and proposal record
// that changed since the last checkpoint, and the marker that the records
// now hold the state as of seq. The caller holds the Group's lock, and seq
// is the last sequence the Group's state has folded: the last event of
// the write rec goes into, or gs.last when nothing else is written.
func (gs *groupState) checkpoint(rec *recorder, seq uint64) error {
	sv := &gs.saved
	for id, w := range gs.g.Items {
		if sv.items[id] != w || sv.named[id] {
			if err := putJSON(&rec.items, []byte(id), w); err != nil {
				return err
			}
			sv.items[id] = w
		}
	}
	for id := range sv.items {
		if gs.g.Items[id] == nil {
			rec.items.Delete([]byte(id))
			delete(sv.items, id)
		}
	}
	for id, p := range gs.g.Proposals {
		if sv.proposals[id] != p || sv.named[id] {
			if err := putJSON(&rec.proposals, []byte(id), p); err != nil {
				return err
			}
			sv.proposals[id] = p
		}
	}
	for id := range sv.proposals {
		if gs.g.Proposals[id] == nil {
			rec.proposals.Delete([]byte(id))
			delete(sv.proposals, id)
		}
	}
	if gs.g.Mission != sv.mission || sv.missionNamed {
		if err := putJSON(&rec.meta, keyMission, missionRecord{gs.g.Mission, gs.g.Ancestors}); err != nil {
			return err
		}
		sv.mission = gs.g.Mission
	}
	if !maps.Equal(gs.g.Contexts, sv.contexts) {
		if err := putJSON(&rec.meta, keyContexts, gs.g.Contexts); err != nil {
			return err
		}
		sv.contexts = maps.Clone(gs.g.Contexts)
	}
	if err := rec.meta.Put(keyStateSeq, seqKey(seq)); err != nil {
		return err
	}
	sv.seq, sv.missionNamed = seq, false
	clear(sv.named)
	return nil
}

// missionRecord is the meta "mission" value.
type missionRecord struct {
	Mission   *protocol.Mission `json:"mission"`
	Ancestors []string          `json:"ancestors"`
}

// loadState reads the Group's checkpointed decision state and folds the
// events after it, as every worker folds them (group.Fold), so gs ends as
// it was after its last durable event. It reports whether the store had
// the stateSeq marker.
func loadState(gs *groupState, gb *groupBuckets) (bool, error) {
	var mission missionRecord
	if _, err := getJSON(gb.meta, keyMission, &mission); err != nil {
		return false, err
	}
	gs.g.Mission, gs.g.Ancestors = mission.Mission, mission.Ancestors
	if err := gb.items.ForEach(func(k, v []byte) error {
		var w group.WorkItem
		if _, err := getJSON(gb.items, k, &w); err != nil {
			return err
		}
		gs.g.Items[string(k)] = &w
		return nil
	}); err != nil {
		return false, err
	}
	if err := gb.proposals.ForEach(func(k, v []byte) error {
		var p group.Proposal
		if _, err := getJSON(gb.proposals, k, &p); err != nil {
			return err
		}
		gs.g.Proposals[string(k)] = &p
		return nil
	}); err != nil {
		return false, err
	}
	if _, err := getJSON(gb.meta, keyContexts, &gs.g.Contexts); err != nil {
		return false, err
	}
	gs.saved = newSavedState()
	gs.saved.items, gs.saved.proposals, gs.saved.mission = maps.Clone(gs.g.Items), maps.Clone(gs.g.Proposals), gs.g.Mission
	gs.saved.contexts = maps.Clone(gs.g.Contexts)
	last := lastSeq(gb.events)
	v := gb.meta.Get(keyStateSeq)
	if len(v) != 8 {
		// Written before checkpoints: every commit kept the records current.
		gs.saved.seq = last
		return false, nil
	}
	gs.saved.seq = seqFromKey(v)
	if gs.saved.seq >= last {
		return true, nil
	}
	if first, _ := onlineFrom(gb); first > gs.saved.seq+1 {
		return false, fmt.Errorf("authority store: group %s keeps events from %d online, its state is saved as of %d", gs.id, first, gs.saved.seq)
	}
	c := gb.events.Cursor()
	for k, raw := c.Seek(seqKey(gs.saved.seq + 1)); k != nil; k, raw = c.Next() {
		var ev protocol.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return false, fmt.Errorf("authority store: group %s event %d: %w", gs.id, seqFromKey(k), err)
		}
		in, err := group.FromWire(&ev)
		if err == nil {
			err = gs.g.Fold(in)
		}
		if err != nil {
			return false, fmt.Errorf("authority store: group %s: fold event %d %s: %w", gs.id, seqFromKey(k), ev.Type, err)
		}
	}
	return true, nil
}

// checkpointAll writes, in one transaction, every Group's changed records
// and its marker at its last sequence, so the next Open folds nothing. It
// writes nothing once a commit has failed: memory may then be ahead of
// the log, and the log is what the next Open must trust.
func (s *Service) checkpointAll() error {
	if s.writer.err() != nil {
		return nil
	}
	type write struct {
		groupID string
		rec     *recorder
	}
	var writes []write
	for _, id := range s.GroupIDs() {
		if s.integrity.damage(id) != nil {
			continue // its records may sit on the damaged pages
		}
		gs := s.peekGroup(id)
		if gs == nil {
			continue // purged since listed
		}
		gs.mu.Lock()
		if gs.last > gs.saved.seq && !gs.stub.Load() {
			rec := &recorder{}
			if err := gs.checkpoint(rec, gs.last); err != nil {
				gs.mu.Unlock()
				return err
			}
			writes = append(writes, write{id, rec})
		}
		gs.mu.Unlock()
	}
	if len(writes) == 0 {
		return nil
	}
	return <-s.writer.submit(func(tx logstore.Tx) error {
		for _, w := range writes {
			gb, err := openGroupBuckets(tx, w.groupID, false)
			if err != nil || gb == nil {
				return fmt.Errorf("group %s buckets: %v", w.groupID, err)
			}
			if err := w.rec.apply(gb); err != nil {
				return err
			}
		}
		return nil
	})
}

// markStateSeq gives Groups read from a store written before checkpoints
// their stateSeq marker (their records are current as of their last
// event), so that from now on a commit may leave the records behind.
func (s *Service) markStateSeq(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.db.Update(func(tx logstore.Tx) error {
		for _, id := range ids {
			gb, err := openGroupBuckets(tx, id, false)
			if err != nil || gb == nil {
				return fmt.Errorf("group %s buckets: %v", id, err)
			}
			if err := gb.meta.Put(keyStateSeq, seqKey(s.groups[id].saved.seq)); err != nil {
				return err
			}
		}
		return nil
	})
}
