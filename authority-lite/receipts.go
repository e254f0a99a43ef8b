package authoritylite

import (
	"fmt"
	"sync"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/protocol"
)

// recentReceipts keeps the receipts of the last commands committed, by
// receipt key, so a retry is answered from memory; older ones are in the
// store. A command looks its key up before it takes its Group's lock
// (receiptBook.lookup) and checks again under it (checkActionID) against what
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

// forget drops keys (their receipts are gone from the store). A key's
// slot in the ring stays until it comes round; should the key be added
// again meanwhile, that slot evicts it early, which only costs a read of
// the store, as evicted counts it.
func (r *recentReceipts) forget(keys [][]byte) {
	if len(keys) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		delete(r.byKey, string(k))
	}
	r.evicted++
}

// get returns the receipt kept for key and how many receipts had been
// evicted when it looked.
func (r *recentReceipts) get(key string) (receiptRecord, bool, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.byKey[key]
	return rec, ok, r.evicted
}

// receiptBook answers a command's retry: the receipts of commands queued
// but not durable yet (in flight: the retry waits for the first), the
// last ones committed (recent) and, past those, the store.
type receiptBook struct {
	db       *logDB
	mu       sync.Mutex
	inflight map[string]*inflight
	recent   *recentReceipts
}

func newReceiptBook(db *logDB) *receiptBook {
	return &receiptBook{db: db, inflight: map[string]*inflight{}, recent: newRecentReceipts(recentReceiptsSize)}
}

// priorReceipt is what a command's receipt key had before its Group lock
// was taken.
type priorReceipt struct {
	read    bool // false: not looked up yet
	rec     receiptRecord
	found   bool
	evicted uint64 // recentReceipts.evicted when the store was read
}

// lookup reads the receipt of (a, actionID): from memory when it
// is recent, else from the store. Every receipt committed after the read
// passes through the in-flight map into recentReceipts (end), so
// the check under the lock sees it there.
func (b *receiptBook) lookup(a protocol.Actor, actionID string) priorReceipt {
	key := receiptKey(a, actionID)
	rec, ok, evicted := b.recent.get(string(key))
	if ok {
		return priorReceipt{read: true, rec: rec, found: true, evicted: evicted}
	}
	p := priorReceipt{read: true, evicted: evicted}
	_ = b.db.View(func(tx logstore.Tx) error {
		p.found, _ = getJSON(tx.Bucket(bucketReceipts), key, &p.rec)
		return nil
	})
	return p
}

// now is the receipt of key as of now, given what lookup
// found before: memory first, then the earlier read, read again only when
// a receipt committed since may have been evicted.
func (b *receiptBook) now(a protocol.Actor, actionID string, prior priorReceipt) (receiptRecord, bool) {
	if !prior.read {
		p := b.lookup(a, actionID)
		return p.rec, p.found
	}
	if prior.found {
		return prior.rec, true
	}
	rec, ok, evicted := b.recent.get(string(receiptKey(a, actionID)))
	if ok {
		return rec, true
	}
	if evicted != prior.evicted {
		p := b.lookup(a, actionID)
		return p.rec, p.found
	}
	return receiptRecord{}, false
}

// get is the receipt of (a, actionID), if any.
func (b *receiptBook) get(a protocol.Actor, actionID string) (receiptRecord, bool) {
	p := b.lookup(a, actionID)
	return p.rec, p.found
}

// Receipts are kept per (actor, actionId) across Groups, so a retry is
// answered and a reuse refused (ACTION_ID_COLLISION) whatever the Group.
// Each Group also indexes the receipts of its commands (bucket
// receiptKeys inside its own), so that they can go once its Group is
// archived and no retry can come any more: with retention on, receiptWindow
// after the archive (purge.go), however short the archive delay; an
// Organization command's receipt goes receiptWindow after its own commit.
// An actor's actionId reused after that is a new command: actionIds must
// be unique per Group and action (docs/wire.md).

// bucketGroupReceipts indexes a Group's receipts: receipt key -> empty.
var bucketGroupReceipts = []byte("receiptKeys")

// indexReceipt records in the Group's index the receipt key of one of its
// commands, in the transaction that stores the receipt.
func indexReceipt(tx logstore.Tx, groupID string, key []byte) error {
	g := tx.Bucket(bucketGroups).Bucket([]byte(groupID))
	if g == nil {
		return fmt.Errorf("group %s has no bucket", groupID)
	}
	idx, err := g.CreateBucketIfNotExists(bucketGroupReceipts)
	if err != nil {
		return err
	}
	return idx.Put(key, []byte{})
}

// dropGroupReceipts deletes the receipts a Group's index names, and the
// index, and returns their keys. (A Group written before the index
// existed keeps the receipts it had then.)
func dropGroupReceipts(tx logstore.Tx, groupID string) ([][]byte, error) {
	g := tx.Bucket(bucketGroups).Bucket([]byte(groupID))
	if g == nil || g.Bucket(bucketGroupReceipts) == nil {
		return nil, nil
	}
	var keys [][]byte
	receipts := tx.Bucket(bucketReceipts)
	err := g.Bucket(bucketGroupReceipts).ForEach(func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return receipts.Delete(k)
	})
	if err != nil {
		return nil, err
	}
	return keys, g.DeleteBucket(bucketGroupReceipts)
}
