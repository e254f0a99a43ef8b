package authoritylite

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
)

var (
	_ wss.Backend   = (*Service)(nil)
	_ wss.Pipeliner = (*Service)(nil)
)

// Authorize lets an active member read a Group. Unknown and forbidden
// Groups get the same GROUP_NOT_FOUND, so membership cannot be probed.
func (s *Service) Authorize(peer, groupID string) error {
	return s.AuthorizeActor(protocol.Actor{Kind: protocol.ActorAgent, ID: peer}, groupID)
}

// Events returns up to max events of a Group after a sequence.
func (s *Service) Events(groupID string, after uint64, max int) ([]wss.StoredEvent, error) {
	gs := s.peekGroup(groupID)
	if gs == nil {
		return nil, protocol.Errorf(protocol.CodeGroupNotFound, "group %s not found", groupID)
	}
	if err := s.integrity.damage(groupID); err != nil {
		return nil, err
	}
	if evs, ok := gs.tail.read(after, max); ok {
		return evs, nil
	}
	return s.storedEvents(groupID, after, max)
}

// storedEvents is Events read from the store.
func (s *Service) storedEvents(groupID string, after uint64, max int) ([]wss.StoredEvent, error) {
	var out []wss.StoredEvent
	var old *protocol.Error
	if err := s.integrity.view(groupID, func(tx logstore.Tx) error {
		if gb, err := openGroupBuckets(tx, groupID, false); err == nil && gb != nil {
			if first, ref := onlineFrom(gb); after+1 < first {
				old = cursorTooOld(groupID, after, first, ref)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if old != nil {
		return nil, old
	}
	err := s.scanEvents(groupID, after, func(ev *protocol.Event, raw []byte) bool {
		out = append(out, storedEvent(ev, raw))
		return max <= 0 || len(out) < max
	})
	return out, err
}

// scanEvents calls fn for each stored event of a Group after a sequence,
// in order, until fn returns false.
func (s *Service) scanEvents(groupID string, after uint64, fn func(ev *protocol.Event, raw []byte) bool) error {
	return s.integrity.view(groupID, func(tx logstore.Tx) error {
		gb, err := openGroupBuckets(tx, groupID, false)
		if err != nil || gb == nil {
			return err
		}
		c := gb.events.Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			var ev protocol.Event
			if err := json.Unmarshal(v, &ev); err != nil {
				return s.integrity.mark(groupID, fmt.Errorf("event %d does not decode: %v", seqFromKey(k), err))
			}
			raw := append([]byte(nil), v...)
			if !fn(&ev, raw) {
				return nil
			}
		}
		return nil
	})
}

// Changed returns a channel closed once the Group's log passes after.
func (s *Service) Changed(groupID string, after uint64) <-chan struct{} {
	gs := s.peekGroup(groupID)
	if gs == nil {
		ch := make(chan struct{})
		return ch
	}
	gs.nmu.Lock()
	ch := gs.changed
	gs.nmu.Unlock()
	if s.LastSequence(groupID) > after {
		done := make(chan struct{})
		close(done)
		return done
	}
	return ch
}

// DecidedSequence is a Group's highest decided sequence: its state (what
// WorkItem and Mission report) already includes it, its group commit may
// not have reached the log yet. LastSequence catches up with it.
func (s *Service) DecidedSequence(groupID string) uint64 {
	gs := s.peekGroup(groupID)
	if gs == nil {
		return 0
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.last
}

// LastSequence is a Group's highest durable sequence (0 for a damaged or
// unknown Group).
func (s *Service) LastSequence(groupID string) uint64 {
	gs := s.peekGroup(groupID)
	if gs == nil || s.integrity.damage(groupID) != nil {
		return 0
	}
	return gs.tail.last.Load()
}

// Acked records a client's durable cursor.
func (s *Service) Acked(peer, groupID string, sequence uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := peer + "\x00" + groupID
	if sequence > s.acks[k] {
		s.acks[k] = sequence
	}
}

// AckedCursors returns the cursors clients have ACKed since this process
// started, by peer and Group.
func (s *Service) AckedCursors() map[[2]string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[[2]string]uint64, len(s.acks))
	for k, seq := range s.acks {
		peer, group, _ := strings.Cut(k, "\x00")
		out[[2]string{peer, group}] = seq
	}
	return out
}

// OrgEvents returns the Organization-scoped events in order.
func (s *Service) OrgEvents() ([][]byte, error) {
	var out [][]byte
	err := s.db.View(func(tx logstore.Tx) error {
		return tx.Bucket(bucketOrg).Bucket(bucketEvents).ForEach(func(_, v []byte) error {
			out = append(out, append([]byte(nil), v...))
			return nil
		})
	})
	return out, err
}
