// Package boltlog is the embedded logstore.Store: one bbolt file, in the
// layout of the authority's authority.db (authority-lite/log.go), so a log
// either writes the other reads:
//
//	groups/<groupId>/events       sequence (8 bytes BE) -> signed event
//	groups/<groupId>/meta "first" lowest sequence online (8 bytes BE; absent: 1)
//	groups/<groupId>/receiptKeys  receipt key -> "" (the Group's receipts, to purge)
//	receipts                      receipt key -> receipt
//	org/agents, org/humans, org/nonces   the Organization's records
//
// A Group's buckets items, proposals and meta are created with it, as the
// service expects them. Every write is one transaction, fsynced before it
// returns; concurrent appends share a transaction (bolt.DB.Batch, which
// gathers for at most 1 ms), so one fsync covers them. A record's revision is a hash of its value: the
// layout has no revision column, and compare-and-set needs only "is it
// still what I read".
package boltlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
)

var (
	bucketGroups   = []byte("groups")
	bucketEvents   = []byte("events")
	bucketMeta     = []byte("meta")
	bucketReceipts = []byte("receipts")
	bucketIndex    = []byte("receiptKeys")
	bucketOrg      = []byte("org")
	keyFirst       = []byte("first")
	// Created with every Group: the service's checkpoint lives there.
	groupBuckets = [][]byte{bucketEvents, []byte("items"), []byte("proposals"), bucketMeta}
	tables       = map[logstore.Table][]byte{
		logstore.Agents:     []byte("agents"),
		logstore.Principals: []byte("humans"),
		logstore.Nonces:     []byte("nonces"),
	}
)

// Store is a logstore.Store in one bbolt file.
type Store struct{ db *bolt.DB }

var _ logstore.Store = (*Store)(nil)

// Open opens (creating when new) the log at path.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("boltlog: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketGroups, bucketReceipts} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		org, err := tx.CreateBucketIfNotExists(bucketOrg)
		if err != nil {
			return err
		}
		for _, name := range tables {
			if _, err := org.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("boltlog: %s: %w", path, err)
	}
	// bbolt's default 10 ms would be a lone writer's wait on every
	// commit; 1 ms still lets concurrent appends share one fsync.
	db.MaxBatchDelay = time.Millisecond
	return &Store{db: db}, nil
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// bounds reads a Group's first and last sequence from its bucket (nil:
// never written).
func bounds(g *bolt.Bucket) (first, last uint64) {
	if g == nil {
		return 1, 0
	}
	first = 1
	if v := g.Bucket(bucketMeta).Get(keyFirst); len(v) == 8 {
		first = binary.BigEndian.Uint64(v)
	}
	if k, _ := g.Bucket(bucketEvents).Cursor().Last(); k != nil {
		last = binary.BigEndian.Uint64(k)
	} else {
		last = first - 1
	}
	return first, last
}

func (s *Store) Append(_ context.Context, c logstore.Commit) error {
	err := s.db.Batch(func(tx *bolt.Tx) error {
		groups := tx.Bucket(bucketGroups)
		g := groups.Bucket([]byte(c.GroupID))
		if _, last := bounds(g); last != c.After {
			return &logstore.ConflictError{GroupID: c.GroupID, Last: last}
		}
		receipts := tx.Bucket(bucketReceipts)
		for _, r := range c.Receipts {
			if receipts.Get([]byte(r.Key)) != nil {
				return fmt.Errorf("receipt %q: %w", r.Key, logstore.ErrReceiptExists)
			}
		}
		if g == nil {
			var err error
			if g, err = groups.CreateBucket([]byte(c.GroupID)); err != nil {
				return err
			}
			for _, name := range groupBuckets {
				if _, err := g.CreateBucket(name); err != nil {
					return err
				}
			}
		}
		events := g.Bucket(bucketEvents)
		for i, raw := range c.Events {
			if err := events.Put(seqKey(c.After+1+uint64(i)), raw); err != nil {
				return err
			}
		}
		if len(c.Receipts) == 0 {
			return nil
		}
		idx, err := g.CreateBucketIfNotExists(bucketIndex)
		if err != nil {
			return err
		}
		for _, r := range c.Receipts {
			if err := receipts.Put([]byte(r.Key), r.Value); err != nil {
				return err
			}
			if err := idx.Put([]byte(r.Key), []byte{}); err != nil {
				return err
			}
		}
		return nil
	})
	return closed(err)
}

func (s *Store) Bounds(_ context.Context, groupID string) (first, last uint64, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		first, last = bounds(tx.Bucket(bucketGroups).Bucket([]byte(groupID)))
		return nil
	})
	return first, last, closed(err)
}

func (s *Store) Read(_ context.Context, groupID string, after uint64, max int, fn func(uint64, []byte) bool) error {
	return closed(s.db.View(func(tx *bolt.Tx) error {
		g := tx.Bucket(bucketGroups).Bucket([]byte(groupID))
		if g == nil {
			return nil
		}
		if first, _ := bounds(g); after+1 < first {
			return fmt.Errorf("group %s keeps events from %d, read after %d: %w", groupID, first, after, logstore.ErrTrimmed)
		}
		c := g.Bucket(bucketEvents).Cursor()
		n := 0
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			n++
			// bbolt's value is valid only inside the transaction.
			if !fn(binary.BigEndian.Uint64(k), bytes.Clone(v)) || (max > 0 && n >= max) {
				return nil
			}
		}
		return nil
	}))
}

func (s *Store) Trim(_ context.Context, groupID string, first uint64) error {
	return closed(s.db.Update(func(tx *bolt.Tx) error {
		g := tx.Bucket(bucketGroups).Bucket([]byte(groupID))
		old, last := bounds(g)
		if first > last+1 {
			return fmt.Errorf("boltlog: trim group %s to %d past its last sequence %d", groupID, first, last)
		}
		if g == nil || first <= old {
			return nil
		}
		c := g.Bucket(bucketEvents).Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < first; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return g.Bucket(bucketMeta).Put(keyFirst, seqKey(first))
	}))
}

func (s *Store) Groups(context.Context) ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketGroups).ForEachBucket(func(k []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	sort.Strings(out)
	return out, closed(err)
}

func (s *Store) Receipt(_ context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		out = bytes.Clone(tx.Bucket(bucketReceipts).Get([]byte(key)))
		return nil
	})
	if err == nil && out == nil {
		err = logstore.ErrNotFound
	}
	return out, closed(err)
}

// revision is a record's revision: a hash of its value, never 0.
func revision(v []byte) uint64 {
	h := fnv.New64a()
	h.Write(v)
	return h.Sum64() | 1
}

func table(tx *bolt.Tx, t logstore.Table) (*bolt.Bucket, error) {
	name, ok := tables[t]
	if !ok {
		return nil, fmt.Errorf("boltlog: no table %q", t)
	}
	return tx.Bucket(bucketOrg).Bucket(name), nil
}

func (s *Store) Get(_ context.Context, t logstore.Table, key string) (val []byte, rev uint64, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b, err := table(tx, t)
		if err != nil {
			return err
		}
		if v := b.Get([]byte(key)); v != nil {
			val, rev = bytes.Clone(v), revision(v)
			return nil
		}
		return logstore.ErrNotFound
	})
	return val, rev, closed(err)
}

// check is compare-and-set: the record's revision is still rev.
func check(b *bolt.Bucket, key string, rev uint64) error {
	v := b.Get([]byte(key))
	if (v == nil && rev == 0) || (v != nil && revision(v) == rev) {
		return nil
	}
	return fmt.Errorf("record %q: %w", key, logstore.ErrConflict)
}

func (s *Store) Put(_ context.Context, t logstore.Table, key string, val []byte, rev uint64) (uint64, error) {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := table(tx, t)
		if err != nil {
			return err
		}
		if err := check(b, key, rev); err != nil {
			return err
		}
		return b.Put([]byte(key), val)
	})
	if err != nil {
		return 0, closed(err)
	}
	return revision(val), nil
}

func (s *Store) Delete(_ context.Context, t logstore.Table, key string, rev uint64) error {
	return closed(s.db.Update(func(tx *bolt.Tx) error {
		b, err := table(tx, t)
		if err != nil {
			return err
		}
		if err := check(b, key, rev); err != nil {
			return err
		}
		return b.Delete([]byte(key))
	}))
}

func (s *Store) Records(_ context.Context, t logstore.Table, fn func(string, []byte) error) error {
	return closed(s.db.View(func(tx *bolt.Tx) error {
		b, err := table(tx, t)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error { return fn(string(k), bytes.Clone(v)) })
	}))
}

func (s *Store) Close() error { return s.db.Close() }

func closed(err error) error {
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %v", logstore.ErrClosed, err)
	}
	return err
}
