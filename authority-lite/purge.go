package authoritylite

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/protocol"
)

// What stays of a released Group, and for how long.
//
// Receipts answer a retry (and refuse a reuse) of a committed action only
// as long as a retry can still arrive: a command is fresh while its
// issuedAt is within the clock skew of the authority's clock, and its
// issuedAt may be up to that skew ahead of the commit, so an online retry
// comes at most two skews after the commit; a command buffered offline
// comes within the offline grace on top (receiptWindow). With retention on
// (Config.RetainEvents), a receipt that nothing else needs is put in the
// root index receiptsDue, ordered by the time it may go: a released
// Group's receipts at its release (every command of the Group came before
// it), an Organization command's at its commit; the archiver deletes them
// from the front of the index once that time has passed. A Group's
// receipts stay while it is active (it takes commands).
//
// With Config.PurgeAfter set, a released Group whose archive is that old
// is purged: its buckets and snapshot files are deleted, the root index
// "purged" keeps its id and last sequence, and it is answered as unknown
// (GROUP_NOT_FOUND); its id is never given to a new Group. Its receipts
// are in receiptsDue already and go at their own time, so a retry that
// comes after a purge is still answered.
//
//	released     groupId -> empty (released before the times were kept), or archivedAt (8 bytes BE, Unix ns)
//	purged       groupId -> last sequence (8 bytes BE)
//	receiptsDue  due time (8 bytes BE, Unix ns) receipt key -> nil
//	goneFiles    snapshot digest -> empty
//
// A snapshot file is deleted after the commit that leaves nothing naming
// it (a purge, or history dropped past it). That commit records its
// digest in goneFiles; once the file is removed a second commit clears the
// record, and Open removes the files still recorded (the process ended in
// between), so no file is left behind for good.

var (
	bucketPurged      = []byte("purged")
	bucketReceiptsDue = []byte("receiptsDue")
	bucketGoneFiles   = []byte("goneFiles")
)

// markGone records, in the commit that stops naming them, the snapshot
// files to remove.
func markGone(tx logstore.Tx, digests []string) error {
	b := tx.Bucket(bucketGoneFiles)
	for _, d := range digests {
		if err := b.Put([]byte(d), []byte{}); err != nil {
			return err
		}
	}
	return nil
}

// snapshotFiles are the snapshot documents beside the log
// (DIR/snapshots/<hex>.json) and the record of those to remove.
type snapshotFiles struct {
	dir    string
	db     *logDB
	writer *writer
	log    *slog.Logger
	// hold, in tests, leaves the files a commit let go on disk as a
	// crash right after that commit would.
	hold bool
}

// removeGone removes the snapshot files of digests, then clears the
// record of those removed (or absent already).
func (s *snapshotFiles) removeGone(digests []string) {
	if s.hold {
		return
	}
	var done [][]byte
	for _, d := range digests {
		if path, err := s.path(d); err == nil {
			if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
				s.log.Warn("removing a snapshot nothing names failed; the next start tries again", "digest", d, "err", err)
				continue
			}
		}
		done = append(done, []byte(d))
	}
	if len(done) == 0 {
		return
	}
	err := <-s.writer.submit(func(tx logstore.Tx) error {
		b := tx.Bucket(bucketGoneFiles)
		for _, k := range done {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.log.Error("clearing removed snapshots from the record failed", "err", err)
	}
}

// redoGone removes, at Open, the snapshot files a commit recorded as gone
// whose removal may not have happened.
func (s *snapshotFiles) redoGone() error {
	var digests []string
	err := s.db.View(func(tx logstore.Tx) error {
		return tx.Bucket(bucketGoneFiles).ForEach(func(k, _ []byte) error {
			digests = append(digests, string(k))
			return nil
		})
	})
	if err != nil {
		return err
	}
	if len(digests) > 0 {
		s.log.Info("removing snapshot files left by an earlier run", "files", len(digests))
		s.removeGone(digests)
	}
	return nil
}

// maxReceiptPrune bounds the receipts one sweep deletes (one transaction).
const maxReceiptPrune = 4096

// receiptWindow is how long a committed command's retry can still arrive.
func (s *Service) receiptWindow() time.Duration {
	if s.cfg.ReceiptWindow > 0 {
		return s.cfg.ReceiptWindow
	}
	return 2*s.skew() + s.offlineGrace()
}

func dueKey(t time.Time, key []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(key)), uint64(max(0, t.UnixNano()))), key...)
}

// scheduleGroupReceipts moves the receipt keys a Group's index names into
// receiptsDue, due at due, and deletes the index.
func scheduleGroupReceipts(tx logstore.Tx, groupID string, due time.Time) error {
	g := tx.Bucket(bucketGroups).Bucket([]byte(groupID))
	if g == nil || g.Bucket(bucketGroupReceipts) == nil {
		return nil
	}
	idx := tx.Bucket(bucketReceiptsDue)
	if err := g.Bucket(bucketGroupReceipts).ForEach(func(k, _ []byte) error {
		return idx.Put(dueKey(due, k), nil)
	}); err != nil {
		return err
	}
	return g.DeleteBucket(bucketGroupReceipts)
}

// releasedAt reads a released index value; ok is false for the empty
// value of a store written before the times were kept.
func releasedAt(v []byte) (time.Time, bool) {
	if len(v) != 8 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))), true
}

// releasedTimes holds when each released Group not purged yet was
// released, while a purge is to come.
type releasedTimes struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (r *releasedTimes) note(id string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]time.Time{}
	}
	r.m[id] = at
}

func (r *releasedTimes) drop(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

// due lists the Groups released at or before t.
func (r *releasedTimes) due(t time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, at := range r.m {
		if !at.After(t) {
			out = append(out, id)
		}
	}
	return out
}

// sweepReleased deletes the receipts whose time has come and purges the
// Groups archived PurgeAfter ago.
func (s *Service) sweepReleased(now time.Time) {
	if err := s.pruneReceipts(now); err != nil {
		s.log.Error("pruning receipts failed", "err", err)
	}
	if s.cfg.PurgeAfter <= 0 {
		return
	}
	for _, id := range s.released.due(now.Add(-s.cfg.PurgeAfter)) {
		if err := s.purge(id); err != nil {
			s.log.Error("purging an archived Group failed", "group", id, "err", err)
		}
	}
}

// pruneReceipts deletes, oldest first, the receipts due by now.
func (s *Service) pruneReceipts(now time.Time) error {
	limit := dueKey(now, nil)
	var gone [][]byte
	err := <-s.writer.submit(func(tx logstore.Tx) error {
		gone = gone[:0]
		idx, receipts := tx.Bucket(bucketReceiptsDue), tx.Bucket(bucketReceipts)
		if idx == nil {
			return nil
		}
		c := idx.Cursor()
		for range maxReceiptPrune {
			k, _ := c.First()
			if k == nil || bytes.Compare(k[:8], limit) > 0 {
				return nil
			}
			if err := receipts.Delete(k[8:]); err != nil {
				return err
			}
			gone = append(gone, append([]byte(nil), k[8:]...))
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		s.receipts.recent.forget(gone)
	}
	return err
}

// purge deletes a released Group: its buckets (whatever receipts its
// index still names too) and the snapshot files its meta names, keeping
// its id and last sequence in "purged".
func (s *Service) purge(id string) error {
	gs := s.rawGroup(id)
	if gs == nil || s.integrity.damage(id) != nil {
		return nil
	}
	s.peekGroup(id) // a placeholder's stub: its sequences
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if !gs.archived {
		return nil
	}
	var files []string
	var dropped [][]byte
	err := <-s.writer.submit(func(tx logstore.Tx) error {
		files, dropped = nil, nil
		gb, err := openGroupBuckets(tx, id, false)
		if err != nil || gb == nil {
			return err
		}
		var ref protocol.SnapshotRef
		if ok, _ := getJSON(gb.meta, keySnapshot, &ref); ok {
			files = append(files, ref.Digest)
		}
		if err := gb.events.ForEach(func(_, v []byte) error {
			if r, ok := announcedSnapshot(v); ok {
				files = append(files, r.Digest)
			}
			return nil
		}); err != nil {
			return err
		}
		// Receipts an index still names (retention was off at the
		// release) go now: nothing would find them any more.
		if dropped, err = dropGroupReceipts(tx, id); err != nil {
			return err
		}
		if err := tx.Bucket(bucketGroups).DeleteBucket([]byte(id)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketReleased).Delete([]byte(id)); err != nil {
			return err
		}
		purged, err := tx.CreateBucketIfNotExists(bucketPurged)
		if err != nil {
			return err
		}
		if err := markGone(tx, files); err != nil {
			return err
		}
		return purged.Put([]byte(id), seqKey(gs.last))
	})
	if err != nil {
		return err
	}
	s.receipts.recent.forget(dropped)
	s.released.drop(id)
	s.mu.Lock()
	delete(s.groups, id)
	for k := range s.acks {
		if strings.HasSuffix(k, "\x00"+id) {
			delete(s.acks, k)
		}
	}
	s.mu.Unlock()
	// Wake every stream still waiting on it: each reads GROUP_NOT_FOUND
	// and ends, instead of holding the deleted state (its tail among it)
	// for as long as its connection lasts.
	gs.notify()
	s.snaps.removeGone(files)
	return nil
}

// Purged reports whether a Group was purged (its id stays taken).
func (s *Service) Purged(groupID string) bool {
	var ok bool
	_ = s.db.View(func(tx logstore.Tx) error {
		if b := tx.Bucket(bucketPurged); b != nil {
			ok = b.Get([]byte(groupID)) != nil
		}
		return nil
	})
	return ok
}
