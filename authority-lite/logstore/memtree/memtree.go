// Package memtree is a logstore.Tree in memory: the image a replicated
// store keeps of its log (jslog.Tree), and a twin of bbolt's for tests.
//
// One Update runs at a time and Views wait for it (a sync.RWMutex): an
// Update changes the tree in place and keeps an undo list, so an error —
// its own, or the persist hook's refusing to store its changes — puts
// back what it changed. The persist hook (UpdateThen) gets the Update's
// changes in order, as Ops, while the lock is held: a store writes them
// durably there, and only then do Views see them. An Update that carries
// several independent writes (the authority's group commit) marks where
// each ends (Cut), so a store that must write it in parts cuts there.
package memtree

import (
	"bytes"
	"errors"
	"slices"
	"sort"
	"sync"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
)

// The errors of a misused tree, as bbolt names them.
var (
	ErrBucketExists     = errors.New("memtree: bucket already exists")
	ErrBucketNotFound   = errors.New("memtree: bucket not found")
	ErrIncompatible     = errors.New("memtree: incompatible value (a bucket and a key under one name)")
	ErrReadOnly         = errors.New("memtree: write in a read transaction")
	ErrClosed           = errors.New("memtree: closed")
	errKeyRequired      = errors.New("memtree: key required")
	errCursorNotOnValue = errors.New("memtree: cursor is not on a key")
)

// OpKind is what one change did.
type OpKind uint8

const (
	OpPut        OpKind = iota + 1 // Key = Value in the bucket at Path
	OpDelete                       // Key removed from Path
	OpBucket                       // bucket Path created (empty)
	OpDropBucket                   // bucket Path and all under it removed
	OpSequence                     // Path's sequence set to Seq
)

// Op is one change of an Update. Path names a bucket from the root.
type Op struct {
	Kind  OpKind
	Path  [][]byte
	Key   []byte
	Value []byte
	Seq   uint64
}

// Tree is a logstore.Tree in memory.
type Tree struct {
	mu     sync.RWMutex
	root   *node
	id     uint64
	closed bool
}

var _ logstore.Tree = (*Tree)(nil)

type node struct {
	path    [][]byte
	entries []entry // by key
	seq     uint64
}

type entry struct {
	key, val []byte
	sub      *node // a bucket; val is nil then
}

// New returns an empty tree.
func New() *Tree { return &Tree{root: &node{}} }

// SetID sets the id Views report and Updates start from (a store's last
// written position).
func (t *Tree) SetID(id uint64) {
	t.mu.Lock()
	t.id = id
	t.mu.Unlock()
}

func (t *Tree) View(fn func(logstore.Tx) error) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return ErrClosed
	}
	return fn(&tx{t: t})
}

func (t *Tree) Update(fn func(logstore.Tx) error) error {
	return t.UpdateThen(fn, nil)
}

// UpdateThen is Update that hands the changes to persist before they are
// kept: persist returns the tree's new id, or an error that undoes them.
// cuts are the indexes in ops where a write marked with Cut ends (the
// last is len(ops)). An Update that changed nothing does not call persist.
func (t *Tree) UpdateThen(fn func(logstore.Tx) error, persist func(ops []Op, cuts []int) (uint64, error)) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	x := &tx{t: t, writable: true}
	err := fn(x)
	if err == nil && persist != nil && len(x.ops) > 0 {
		var id uint64
		if id, err = persist(x.ops, append(x.cuts, len(x.ops))); err == nil {
			t.id = id
		}
	}
	if err != nil {
		for i := len(x.undo) - 1; i >= 0; i-- {
			x.undo[i]()
		}
		t.mu.Unlock()
		return err
	}
	if persist == nil {
		t.id++
	}
	t.mu.Unlock()
	for _, f := range x.commit {
		f()
	}
	return nil
}

// Apply makes one change without an Update (a store loading its log).
func (t *Tree) Apply(op Op) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.root
	for _, name := range op.Path[:max(len(op.Path)-1, 0)] {
		if n = n.bucket(name); n == nil {
			return ErrBucketNotFound
		}
	}
	x := &tx{t: t, writable: true}
	switch op.Kind {
	case OpBucket, OpDropBucket:
		parent := &bucket{x: x, n: n}
		name := op.Path[len(op.Path)-1]
		if op.Kind == OpDropBucket {
			return parent.DeleteBucket(name)
		}
		_, err := parent.CreateBucketIfNotExists(name)
		return err
	}
	if len(op.Path) > 0 {
		if n = n.bucket(op.Path[len(op.Path)-1]); n == nil {
			return ErrBucketNotFound
		}
	}
	b := &bucket{x: x, n: n}
	switch op.Kind {
	case OpPut:
		return b.Put(op.Key, op.Value)
	case OpDelete:
		return b.Delete(op.Key)
	case OpSequence:
		n.seq = op.Seq
	}
	return nil
}

func (t *Tree) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	return nil
}

type tx struct {
	t        *Tree
	writable bool
	ops      []Op
	cuts     []int
	undo     []func()
	commit   []func()
}

// Cut marks the end of one write of several in an Update: a store that
// cannot write the Update at once keeps each write whole.
func (x *tx) Cut() {
	if n := len(x.ops); n > 0 && (len(x.cuts) == 0 || x.cuts[len(x.cuts)-1] != n) {
		x.cuts = append(x.cuts, n)
	}
}

func (x *tx) ID() uint64                         { return x.t.id }
func (x *tx) Writable() bool                     { return x.writable }
func (x *tx) OnCommit(fn func())                 { x.commit = append(x.commit, fn) }
func (x *tx) root() *bucket                      { return &bucket{x: x, n: x.t.root} }
func (x *tx) Bucket(name []byte) logstore.Bucket { return x.root().Bucket(name) }

func (x *tx) CreateBucketIfNotExists(name []byte) (logstore.Bucket, error) {
	return x.root().CreateBucketIfNotExists(name)
}

func (x *tx) ForEach(fn func([]byte) error) error { return x.root().ForEachBucket(fn) }

func (x *tx) record(op Op) { x.ops = append(x.ops, op) }

func (n *node) find(key []byte) (int, bool) {
	i := sort.Search(len(n.entries), func(i int) bool { return bytes.Compare(n.entries[i].key, key) >= 0 })
	return i, i < len(n.entries) && bytes.Equal(n.entries[i].key, key)
}

func (n *node) bucket(name []byte) *node {
	if i, ok := n.find(name); ok {
		return n.entries[i].sub
	}
	return nil
}

func (n *node) insert(i int, e entry) {
	n.entries = slices.Insert(n.entries, i, e)
}

func (n *node) remove(key []byte) {
	if i, ok := n.find(key); ok {
		n.entries = slices.Delete(n.entries, i, i+1)
	}
}

// set puts e in place of key's entry (or inserts it).
func (n *node) set(e entry) {
	if i, ok := n.find(e.key); ok {
		n.entries[i] = e
		return
	}
	i, _ := n.find(e.key)
	n.insert(i, e)
}

type bucket struct {
	x *tx
	n *node
}

func (b *bucket) Get(key []byte) []byte {
	if i, ok := b.n.find(key); ok {
		return b.n.entries[i].val
	}
	return nil
}

// restore undoes a change to key: back to e, or gone when it was not there.
func (b *bucket) restore(key []byte, e entry, had bool) {
	n := b.n
	b.x.undo = append(b.x.undo, func() {
		if had {
			n.set(e)
		} else {
			n.remove(key)
		}
	})
}

func (b *bucket) Put(key, value []byte) error {
	if !b.x.writable {
		return ErrReadOnly
	}
	if len(key) == 0 {
		return errKeyRequired
	}
	i, ok := b.n.find(key)
	var old entry
	if ok {
		if old = b.n.entries[i]; old.sub != nil {
			return ErrIncompatible
		}
	}
	key, value = bytes.Clone(key), bytes.Clone(value)
	if value == nil {
		value = []byte{}
	}
	b.restore(key, old, ok)
	b.n.set(entry{key: key, val: value})
	b.x.record(Op{Kind: OpPut, Path: b.n.path, Key: key, Value: value})
	return nil
}

func (b *bucket) Delete(key []byte) error {
	if !b.x.writable {
		return ErrReadOnly
	}
	i, ok := b.n.find(key)
	if !ok {
		return nil
	}
	old := b.n.entries[i]
	if old.sub != nil {
		return ErrIncompatible
	}
	b.restore(old.key, old, true)
	b.n.remove(key)
	b.x.record(Op{Kind: OpDelete, Path: b.n.path, Key: old.key})
	return nil
}

func (b *bucket) ForEach(fn func(k, v []byte) error) error {
	for _, e := range slices.Clone(b.n.entries) {
		if err := fn(e.key, e.val); err != nil {
			return err
		}
	}
	return nil
}

func (b *bucket) ForEachBucket(fn func([]byte) error) error {
	for _, e := range slices.Clone(b.n.entries) {
		if e.sub == nil {
			continue
		}
		if err := fn(e.key); err != nil {
			return err
		}
	}
	return nil
}

func (b *bucket) NextSequence() (uint64, error) {
	if !b.x.writable {
		return 0, ErrReadOnly
	}
	n, old := b.n, b.n.seq
	b.x.undo = append(b.x.undo, func() { n.seq = old })
	n.seq++
	b.x.record(Op{Kind: OpSequence, Path: n.path, Seq: n.seq})
	return n.seq, nil
}

func (b *bucket) Bucket(name []byte) logstore.Bucket {
	if n := b.n.bucket(name); n != nil {
		return &bucket{x: b.x, n: n}
	}
	return nil
}

func (b *bucket) CreateBucket(name []byte) (logstore.Bucket, error) {
	if !b.x.writable {
		return nil, ErrReadOnly
	}
	if len(name) == 0 {
		return nil, errKeyRequired
	}
	if i, ok := b.n.find(name); ok {
		if b.n.entries[i].sub != nil {
			return nil, ErrBucketExists
		}
		return nil, ErrIncompatible
	}
	name = bytes.Clone(name)
	sub := &node{path: append(slices.Clone(b.n.path), name)}
	b.restore(name, entry{}, false)
	b.n.set(entry{key: name, sub: sub})
	b.x.record(Op{Kind: OpBucket, Path: sub.path})
	return &bucket{x: b.x, n: sub}, nil
}

func (b *bucket) CreateBucketIfNotExists(name []byte) (logstore.Bucket, error) {
	if c := b.Bucket(name); c != nil {
		return c, nil
	}
	return b.CreateBucket(name)
}

func (b *bucket) DeleteBucket(name []byte) error {
	if !b.x.writable {
		return ErrReadOnly
	}
	i, ok := b.n.find(name)
	if !ok {
		return ErrBucketNotFound
	}
	old := b.n.entries[i]
	if old.sub == nil {
		return ErrIncompatible
	}
	b.restore(old.key, old, true)
	b.n.remove(name)
	b.x.record(Op{Kind: OpDropBucket, Path: old.sub.path})
	return nil
}

func (b *bucket) Cursor() logstore.Cursor { return &cursor{b: b} }

// cursor remembers the key it is on, not a position: a Delete, or any
// change, between two moves leaves it correct.
type cursor struct {
	b   *bucket
	key []byte
	on  bool
}

func (c *cursor) at(i int) ([]byte, []byte) {
	es := c.b.n.entries
	if i < 0 || i >= len(es) {
		c.on, c.key = false, nil
		return nil, nil
	}
	c.on, c.key = true, es[i].key
	return es[i].key, es[i].val
}

func (c *cursor) First() ([]byte, []byte) { return c.at(0) }
func (c *cursor) Last() ([]byte, []byte)  { return c.at(len(c.b.n.entries) - 1) }

func (c *cursor) Seek(key []byte) ([]byte, []byte) {
	i, _ := c.b.n.find(key)
	return c.at(i)
}

func (c *cursor) Next() ([]byte, []byte) {
	if !c.on {
		return nil, nil
	}
	i, ok := c.b.n.find(c.key)
	if ok {
		i++
	}
	return c.at(i)
}

func (c *cursor) Delete() error {
	if !c.on {
		return errCursorNotOnValue
	}
	return c.b.Delete(c.key)
}
