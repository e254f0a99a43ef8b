package boltlog

import (
	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
)

// Tree is a logstore.Tree on a bbolt database the caller opened (the
// authority opens authority.db itself: it tells a damaged file and a
// locked one apart). The Tree's transactions are bbolt's.
type Tree struct{ DB *bolt.DB }

var _ logstore.Tree = Tree{}

func (t Tree) View(fn func(logstore.Tx) error) error {
	return t.DB.View(func(tx *bolt.Tx) error { return fn(Tx{tx}) })
}

func (t Tree) Update(fn func(logstore.Tx) error) error {
	return t.DB.Update(func(tx *bolt.Tx) error { return fn(Tx{tx}) })
}

func (t Tree) Close() error { return t.DB.Close() }

// Tx is a bbolt transaction as a logstore.Tx; Tx.Tx is bbolt's own.
type Tx struct{ Tx *bolt.Tx }

func (t Tx) ID() uint64        { return uint64(t.Tx.ID()) }
func (t Tx) Writable() bool    { return t.Tx.Writable() }
func (t Tx) OnCommit(f func()) { t.Tx.OnCommit(f) }

func (t Tx) Bucket(name []byte) logstore.Bucket { return bucket(t.Tx.Bucket(name)) }

func (t Tx) CreateBucketIfNotExists(name []byte) (logstore.Bucket, error) {
	b, err := t.Tx.CreateBucketIfNotExists(name)
	return bucket(b), err
}

func (t Tx) ForEach(fn func(name []byte) error) error {
	return t.Tx.ForEach(func(name []byte, _ *bolt.Bucket) error { return fn(name) })
}

// Bucket is a bbolt bucket as a logstore.Bucket.
type Bucket struct{ B *bolt.Bucket }

// bucket keeps a missing bucket a nil interface, not a nil *bolt.Bucket.
func bucket(b *bolt.Bucket) logstore.Bucket {
	if b == nil {
		return nil
	}
	return Bucket{b}
}

func (b Bucket) Get(k []byte) []byte                         { return b.B.Get(k) }
func (b Bucket) Put(k, v []byte) error                       { return b.B.Put(k, v) }
func (b Bucket) Delete(k []byte) error                       { return b.B.Delete(k) }
func (b Bucket) ForEach(fn func(k, v []byte) error) error    { return b.B.ForEach(fn) }
func (b Bucket) ForEachBucket(fn func(k []byte) error) error { return b.B.ForEachBucket(fn) }
func (b Bucket) NextSequence() (uint64, error)               { return b.B.NextSequence() }
func (b Bucket) Cursor() logstore.Cursor                     { return b.B.Cursor() }
func (b Bucket) Bucket(name []byte) logstore.Bucket          { return bucket(b.B.Bucket(name)) }
func (b Bucket) DeleteBucket(name []byte) error              { return b.B.DeleteBucket(name) }

func (b Bucket) CreateBucket(name []byte) (logstore.Bucket, error) {
	c, err := b.B.CreateBucket(name)
	return bucket(c), err
}

func (b Bucket) CreateBucketIfNotExists(name []byte) (logstore.Bucket, error) {
	c, err := b.B.CreateBucketIfNotExists(name)
	return bucket(c), err
}
