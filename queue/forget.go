package queue

import (
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// bktForgotten holds the tombstones of forgotten Groups (doc.go "Forgotten
// Groups").
var bktForgotten = []byte("forgotten")

// Tombstone is what the store keeps of a Group it forgot: enough to refuse
// its events and not subscribe it again.
type Tombstone struct {
	GroupID     string                `json:"groupId"`
	MissionID   string                `json:"missionId,omitempty"`
	State       protocol.MissionState `json:"state,omitempty"`
	Cursor      uint64                `json:"cursor"`
	ForgottenAt protocol.Time         `json:"forgottenAt"`
}

// ErrGroupHeld is returned by Forget for a Group the outbox still holds a
// Command of.
var ErrGroupHeld = fmt.Errorf("queue: group still holds a command of this worker")

// Forget drops every bucket of a Group and leaves a tombstone, in one
// transaction: its events are refused from then on (Commit counts them as
// duplicates and stores nothing), Cursors no longer lists it and
// Forgotten reports it, so the client does not subscribe it again when the
// authority lists it. The caller decides that the Group is over for this
// worker (runtime: a terminal Mission holding nothing of it); the store
// refuses only while its outbox holds a Command of the Group
// (ErrGroupHeld). Forgetting a Group twice, or one never known, records
// the tombstone.
func (s *Store) Forget(groupID string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	s.mu.RLock()
	g := s.groups[groupID]
	s.mu.RUnlock()
	ts := Tombstone{GroupID: groupID, ForgottenAt: protocol.NewTime(s.opts.Clock.Now())}
	if g != nil {
		ts.MissionID, ts.State, ts.Cursor = g.mis.MissionID, g.mis.State, g.cursor
	}
	raw, err := json.Marshal(ts)
	if err != nil {
		return err
	}
	err = s.update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bktOutbox).ForEach(func(_, v []byte) error {
			e, err := decodeOutbox(v)
			if err == nil && e.GroupID == groupID {
				return fmt.Errorf("%w: %s of group %s", ErrGroupHeld, e.ActionID, groupID)
			}
			return err
		}); err != nil {
			return err
		}
		if tx.Bucket(bktGroups).Bucket([]byte(groupID)) != nil {
			if err := tx.Bucket(bktGroups).DeleteBucket([]byte(groupID)); err != nil {
				return err
			}
		}
		b, err := tx.CreateBucketIfNotExists(bktForgotten)
		if err != nil {
			return err
		}
		return b.Put([]byte(groupID), raw)
	})
	if err != nil {
		return fmt.Errorf("queue: forget %s: %w", groupID, err)
	}
	s.mu.Lock()
	delete(s.groups, groupID)
	s.forgotten[groupID] = true
	s.mu.Unlock()
	return nil
}

// Forgotten reports whether the store forgot the Group (a tombstone).
func (s *Store) Forgotten(groupID string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.forgotten[groupID]
}

// Tombstones lists the forgotten Groups, sorted by id.
func (s *Store) Tombstones() ([]Tombstone, error) {
	var out []Tombstone
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktForgotten)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var t Tombstone
			if err := json.Unmarshal(v, &t); err != nil {
				return err
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// KeepTombstones drops the tombstones of Groups not in listed: the
// authority no longer lists them to this agent (it archived them, or the
// membership ended), so nothing would subscribe them again. This bounds
// the tombstones by what the authority lists.
func (s *Store) KeepTombstones(listed []string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	s.mu.RLock()
	var drop []string
	for id := range s.forgotten {
		if !slices.Contains(listed, id) {
			drop = append(drop, id)
		}
	}
	s.mu.RUnlock()
	if len(drop) == 0 {
		return nil
	}
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktForgotten)
		for _, id := range drop {
			if err := b.Delete([]byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: drop tombstones: %w", err)
	}
	s.mu.Lock()
	for _, id := range drop {
		delete(s.forgotten, id)
	}
	s.mu.Unlock()
	return nil
}

// loadForgotten reads the tombstones' ids into memory.
func (s *Store) loadForgotten(tx *bolt.Tx) error {
	b := tx.Bucket(bktForgotten)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, _ []byte) error {
		s.forgotten[string(k)] = true
		return nil
	})
}
