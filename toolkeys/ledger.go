package toolkeys

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout of the toolkeys bucket this code reads and
// writes.
const SchemaVersion = 1

// ErrSchema is returned by OpenLedger for a bucket of another layout.
var ErrSchema = errors.New("toolkeys: unsupported ledger schema version")

// Bucket tree inside the host's bbolt file:
//
//	toolkeys/
//	  meta/     "schema" -> uint64 big-endian
//	  records/  idempotency key -> Record (JSON)
//	  fences/   JCS([missionId, workItemId]) -> lowest live ownership epoch, uint64 big-endian
var (
	bktRoot    = []byte("toolkeys")
	bktMeta    = []byte("meta")
	bktRecords = []byte("records")
	bktFences  = []byte("fences")
	keySchema  = []byte("schema")
)

// Call performs one attempt of an external operation. key is the same for
// every attempt of the operation, in every process: hand it to the
// service as its idempotency key. attempt counts from 1 and keeps growing
// across restarts; AttemptKey(key, attempt) names one attempt for a
// service that wants a fresh key per try (spec 11.4), at the price of no
// deduplication of an attempt whose outcome a crash left unknown.
type Call func(ctx context.Context, key string, attempt uint64) ([]byte, error)

// Result is what Do returns for an operation that completed.
type Result struct {
	Key      string // the operation's idempotency key
	Attempt  uint64 // the attempt that produced Value (or, on error, that was tried)
	Value    []byte // the bytes the completed attempt returned
	Replayed bool   // Value came from the ledger; nothing was called
}

// Options tune a Ledger. The zero value is ready for production.
type Options struct {
	// MaxAttempts bounds the attempts of each operation run by Do; 0 means
	// no bound. DoLimited takes a per-call bound instead.
	MaxAttempts uint64
	// Now stamps records; nil means time.Now.
	Now func() time.Time
}

// Ledger records every external operation's attempts and result in the
// host's bbolt file, so a retried or re-run operation reuses its key and
// a completed one returns its first result. It is safe for concurrent use.
// Open one Ledger per file: the guard against two concurrent Do of one key
// lives in the Ledger, not in the file.
type Ledger struct {
	db   *bolt.DB
	opts Options

	mu    sync.Mutex // guards locks
	locks map[string]*keyLock

	beforeStart func() // tests only: runs between Do's read and its start
}

// keyLock serializes Do calls of one key; a channel so waiting honours ctx.
type keyLock struct {
	ch   chan struct{}
	refs int
}

// OpenLedger is OpenLedgerWith(db, Options{}).
func OpenLedger(db *bolt.DB) (*Ledger, error) { return OpenLedgerWith(db, Options{}) }

// OpenLedgerWith creates (if needed) and checks the toolkeys bucket in db,
// which the caller owns and closes (the worker's store: queue.Store.DB()).
// On a read-only db only Lookup, Records and FenceOf work.
func OpenLedgerWith(db *bolt.DB, opts Options) (*Ledger, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Ledger{db: db, opts: opts, locks: make(map[string]*keyLock)}
	var err error
	if db.IsReadOnly() {
		err = db.View(checkLayout)
	} else {
		err = db.Update(initLayout)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

func initLayout(tx *bolt.Tx) error {
	root, err := tx.CreateBucketIfNotExists(bktRoot)
	if err != nil {
		return err
	}
	meta, err := root.CreateBucketIfNotExists(bktMeta)
	if err != nil {
		return err
	}
	if v := meta.Get(keySchema); v == nil {
		if err := meta.Put(keySchema, u64(SchemaVersion)); err != nil {
			return err
		}
	}
	for _, name := range [][]byte{bktRecords, bktFences} {
		if _, err := root.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return checkLayout(tx)
}

func checkLayout(tx *bolt.Tx) error {
	root := tx.Bucket(bktRoot)
	if root == nil || root.Bucket(bktMeta) == nil || root.Bucket(bktRecords) == nil || root.Bucket(bktFences) == nil {
		return fmt.Errorf("%w: no toolkeys ledger in this file", ErrSchema)
	}
	v := root.Bucket(bktMeta).Get(keySchema)
	if len(v) != 8 || binary.BigEndian.Uint64(v) != SchemaVersion {
		return fmt.Errorf("%w: file has %x, this build reads %d", ErrSchema, v, SchemaVersion)
	}
	return nil
}

// Do runs op at most once to completion. If op's key is recorded as
// completed it returns the recorded result without calling. Otherwise it
// durably records the start of a new attempt (committed before call runs,
// so an effect cut short by a crash is retried under the same key), calls,
// and durably records the outcome. A call error is returned wrapped and
// leaves the operation retryable by a later Do, unless it was Permanent.
// An op whose epoch is below its WorkItem's fence gets WORK_STALE_OWNERSHIP
// and is never called; starting an attempt raises the fence to op's epoch.
//
// A second Do of a key already running in this process waits for the first
// (or for ctx) and then replays, retries or refuses like any later Do.
func (l *Ledger) Do(ctx context.Context, op Op, call Call) (Result, error) {
	return l.DoLimited(ctx, op, l.opts.MaxAttempts, call)
}

// DoLimited is Do with this call's attempt budget (0: unlimited), for
// budgets that come from the WorkItem's contract. Once maxAttempts attempts
// have begun without completing, it returns ErrExhausted without calling.
func (l *Ledger) DoLimited(ctx context.Context, op Op, maxAttempts uint64, call Call) (Result, error) {
	key, err := Key(op)
	if err != nil {
		return Result{}, err
	}
	res := Result{Key: key}
	unlock, err := l.lock(ctx, key)
	if err != nil {
		return res, err
	}
	defer unlock()

	// Read first: a replay or refusal costs no write.
	err = l.db.View(func(tx *bolt.Tx) error {
		fence, r, err := load(tx, op, key)
		if err != nil {
			return err
		}
		v, err := decide(op, fence, r, maxAttempts)
		if v == verdictReplay {
			res.Attempt, res.Value, res.Replayed = r.Attempts, r.Result, true
		}
		return err
	})
	if err != nil || res.Replayed {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if l.beforeStart != nil {
		l.beforeStart()
	}

	// Begin the attempt. Decide again: a Fence may have landed since.
	var rec *Record
	err = l.db.Update(func(tx *bolt.Tx) error {
		fence, r, err := load(tx, op, key)
		if err != nil {
			return err
		}
		v, err := decide(op, fence, r, maxAttempts)
		if v == verdictReplay { // only if another Ledger shares db
			res.Attempt, res.Value, res.Replayed = r.Attempts, r.Result, true
			return nil
		}
		if err != nil {
			return err
		}
		now := l.opts.Now().UTC()
		if r == nil {
			r = &Record{Key: key, Op: op, StartedAt: now}
		}
		r.Attempts++
		r.State, r.Error, r.UpdatedAt = StateStarted, "", now
		rec = r
		if op.OwnershipEpoch > fence {
			if err := putFence(tx, op.MissionID, op.WorkItemID, op.OwnershipEpoch); err != nil {
				return err
			}
		}
		return putRecord(tx, r)
	})
	if err != nil || res.Replayed {
		return res, err
	}
	res.Attempt = rec.Attempts

	val, callErr := call(ctx, key, rec.Attempts)
	finish(rec, val, callErr, l.opts.Now().UTC())
	if err := l.db.Update(func(tx *bolt.Tx) error { return putRecord(tx, rec) }); err != nil {
		// The effect may have happened; the next Do retries it under the
		// same key and the service deduplicates.
		return res, fmt.Errorf("toolkeys: %s attempt %d: record outcome: %w", key, rec.Attempts, err)
	}
	if callErr != nil {
		return res, fmt.Errorf("toolkeys: %s attempt %d: %w", key, rec.Attempts, callErr)
	}
	res.Value = val
	return res, nil
}

// Lookup returns the record of an idempotency key.
func (l *Ledger) Lookup(key string) (Record, bool, error) {
	var rec Record
	var found bool
	err := l.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bktRoot).Bucket(bktRecords).Get([]byte(key))
		if v == nil {
			return nil
		}
		var err error
		rec, err = decodeRecord(key, v)
		found = err == nil
		return err
	})
	return rec, found, err
}

// Records calls fn for every record in key order, inside one read
// transaction (a consistent view); an error from fn stops the walk. fn
// must not call Do or Fence: a write waiting on this read can deadlock.
func (l *Ledger) Records(fn func(Record) error) error {
	return l.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktRoot).Bucket(bktRecords).ForEach(func(k, v []byte) error {
			rec, err := decodeRecord(string(k), v)
			if err != nil {
				return err
			}
			return fn(rec)
		})
	})
}

// lock takes the in-process lock of key, waiting for ctx at most.
func (l *Ledger) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	kl := l.locks[key]
	if kl == nil {
		kl = &keyLock{ch: make(chan struct{}, 1)}
		l.locks[key] = kl
	}
	kl.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if kl.refs--; kl.refs == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
	select {
	case kl.ch <- struct{}{}:
		return func() { <-kl.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// load reads op's fence and record (nil if none) in tx.
func load(tx *bolt.Tx, op Op, key string) (uint64, *Record, error) {
	fence, err := getFence(tx, op.MissionID, op.WorkItemID)
	if err != nil {
		return 0, nil, err
	}
	v := tx.Bucket(bktRoot).Bucket(bktRecords).Get([]byte(key))
	if v == nil {
		return fence, nil, nil
	}
	rec, err := decodeRecord(key, v)
	if err != nil {
		return 0, nil, err
	}
	return fence, &rec, nil
}

func putRecord(tx *bolt.Tx, r *Record) error {
	v, err := encodeRecord(r)
	if err != nil {
		return fmt.Errorf("toolkeys: encode %s: %w", r.Key, err)
	}
	return tx.Bucket(bktRoot).Bucket(bktRecords).Put([]byte(r.Key), v)
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
