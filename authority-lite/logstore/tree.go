package logstore

// Tree is the authority's whole store as the Service keeps it: a tree of
// named buckets of keys in byte order, read and written in transactions
// (the layout is drawn in authority-lite/log.go). Store above is the
// per-Group view of the same log, with compare-and-set on each Group, for
// deciders that do not hold the whole log in one process; the Service,
// one process serving, writes the Group's events, the records they
// changed, its receipt and its follow-ups in one transaction, and group
// commit puts many commands in one: that is a Tree's Update.
//
// boltlog.Tree is bbolt itself (authority.db unchanged); jslog.Tree keeps
// the tree in a JetStream stream, one subject per key, and in memory.
//
// The interface is the part of bbolt's the Service uses, with its rules:
// a value returned is valid only inside its transaction, Update's changes
// are durable when it returns nil and none of them are when it returns an
// error, and a bucket holds either a key or a bucket under one name.
type Tree interface {
	View(fn func(Tx) error) error
	Update(fn func(Tx) error) error
	Close() error
}

// Tx is one transaction of a Tree.
type Tx interface {
	// ID rises with every committed Update: the authority records the last
	// one beside the log and refuses a log that went back (a restored copy).
	ID() uint64
	// Writable reports whether the transaction is an Update.
	Writable() bool
	// Bucket is a root bucket, nil when there is none.
	Bucket(name []byte) Bucket
	CreateBucketIfNotExists(name []byte) (Bucket, error)
	// ForEach calls fn with every root bucket's name, in order.
	ForEach(fn func(name []byte) error) error
	// OnCommit runs fn once the Update committed.
	OnCommit(fn func())
}

// Bucket is a bucket in a transaction.
type Bucket interface {
	Get(key []byte) []byte
	Put(key, value []byte) error
	Delete(key []byte) error
	// ForEach calls fn with every key in order; v is nil for a bucket.
	ForEach(fn func(k, v []byte) error) error
	// ForEachBucket calls fn with every sub-bucket's name in order.
	ForEachBucket(fn func(name []byte) error) error
	Cursor() Cursor
	// NextSequence returns the bucket's next integer, from 1.
	NextSequence() (uint64, error)

	Bucket(name []byte) Bucket
	CreateBucket(name []byte) (Bucket, error)
	CreateBucketIfNotExists(name []byte) (Bucket, error)
	DeleteBucket(name []byte) error
}

// Cutter is a Tx that may be written in parts (jslog.Tree: a server takes
// so many messages in one atomic write): Cut marks where one of the
// Update's independent writes ends, and a part never ends elsewhere. The
// authority's group commit cuts after each command.
type Cutter interface{ Cut() }

// Cursor walks a bucket's keys in order; k is nil past either end.
type Cursor interface {
	First() (k, v []byte)
	Last() (k, v []byte)
	Seek(key []byte) (k, v []byte)
	Next() (k, v []byte)
	// Delete removes the key the cursor is on; Next then goes on from it.
	Delete() error
}
