package authoritylite

import (
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// recentReceipts keeps the receipts of the last commands committed, by
// receipt key, so a retry is answered from memory; older ones are in the
// store. A command looks its key up before it takes its Group's lock
// (lookupReceipt) and checks again under it (checkActionID) against what
// was committed since, without a second read of the store as long as
// nothing it might need has been evicted.
type recentReceipts struct {
	mu    sync.Mutex
	byKey map[string]receiptRecord
	ring  []string // keys, oldest at next once full
	next  int
	// evicted counts the receipts dropped so far.
	evicted uint64
}

// recentReceiptsSize bounds the receipts kept in memory.
const recentReceiptsSize = 8192

func newRecentReceipts(n int) *recentReceipts {
	return &recentReceipts{byKey: make(map[string]receiptRecord, n), ring: make([]string, 0, n)}
}

func (r *recentReceipts) add(key string, rec receiptRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byKey[key]; ok {
		r.byKey[key] = rec
		return
	}
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, key)
	} else {
		delete(r.byKey, r.ring[r.next])
		r.ring[r.next] = key
		r.next = (r.next + 1) % len(r.ring)
		r.evicted++
	}
	r.byKey[key] = rec
}

// get returns the receipt kept for key and how many receipts had been
// evicted when it looked.
func (r *recentReceipts) get(key string) (receiptRecord, bool, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.byKey[key]
	return rec, ok, r.evicted
}

// priorReceipt is what a command's receipt key had before its Group lock
// was taken.
type priorReceipt struct {
	read    bool // false: not looked up yet
	rec     receiptRecord
	found   bool
	evicted uint64 // recentReceipts.evicted when the store was read
}

// lookupReceipt reads the receipt of (a, actionID): from memory when it
// is recent, else from the store. Every receipt committed after the read
// passes through the in-flight map into recentReceipts (endInflight), so
// the check under the lock sees it there.
func (s *Service) lookupReceipt(a protocol.Actor, actionID string) priorReceipt {
	key := receiptKey(a, actionID)
	rec, ok, evicted := s.recent.get(string(key))
	if ok {
		return priorReceipt{read: true, rec: rec, found: true, evicted: evicted}
	}
	p := priorReceipt{read: true, evicted: evicted}
	_ = s.db.View(func(tx *bolt.Tx) error {
		p.found, _ = getJSON(tx.Bucket(bucketReceipts), key, &p.rec)
		return nil
	})
	return p
}

// receiptNow is the receipt of key as of now, given what lookupReceipt
// found before: memory first, then the earlier read, read again only when
// a receipt committed since may have been evicted.
func (s *Service) receiptNow(a protocol.Actor, actionID string, prior priorReceipt) (receiptRecord, bool) {
	if !prior.read {
		p := s.lookupReceipt(a, actionID)
		return p.rec, p.found
	}
	if prior.found {
		return prior.rec, true
	}
	rec, ok, evicted := s.recent.get(string(receiptKey(a, actionID)))
	if ok {
		return rec, true
	}
	if evicted != prior.evicted {
		p := s.lookupReceipt(a, actionID)
		return p.rec, p.found
	}
	return receiptRecord{}, false
}

// receipt is the receipt of (a, actionID), if any.
func (s *Service) receipt(a protocol.Actor, actionID string) (receiptRecord, bool) {
	p := s.lookupReceipt(a, actionID)
	return p.rec, p.found
}
