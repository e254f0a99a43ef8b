// Package logstore is the authority's durable log behind one small
// interface, so the same authority can keep it in an embedded bbolt file
// (boltlog, the default) or in a replicated NATS JetStream stream (jslog).
//
// What the authority needs of its log follows from the protocol (spec
// 10.4): every Group is an independent, totally ordered log and no command
// spans two Groups, so the one write is "append this command's events if
// nothing was appended to the Group since I decided": a compare-and-set on
// the Group's last sequence. Two deciders racing for one Group cannot both
// append; the loser gets ErrConflict, reads again and decides again. The
// command's receipt is written with its events, all or nothing, and a
// receipt key already taken refuses the whole commit, so a retry decided
// twice (on two replicas) appends once.
//
// Beside the Groups, the Organization keeps keyed records (agent cards,
// sessions and their epochs, principals with their keys, HELLO nonces): Get returns a
// revision, Put takes the revision it expects, so two writers of one
// record cannot both win either.
//
// Event bytes are the signed events as the authority seals them; a
// Group's sequence is the count of its events, carried inside each signed
// event, and every store numbers them the same way whatever its own
// numbering is.
package logstore

import (
	"context"
	"errors"
)

// Store is the authority's log. Implementations are safe for concurrent
// use; a nil error from a write means the write is durable (synced, and
// replicated where the store replicates).
type Store interface {
	// Append stores c if the Group's last sequence is still c.After:
	// c.Events become sequences After+1 … After+len(Events) and c.Receipts
	// are stored with them, all or nothing. A Group moved on returns an
	// error matching ErrConflict; a receipt key already stored returns
	// one matching ErrReceiptExists, and nothing is written.
	Append(ctx context.Context, c Commit) error
	// Bounds returns the Group's lowest online and last sequence (first
	// is last+1 when nothing is online, 1 and 0 for a Group never written).
	Bounds(ctx context.Context, groupID string) (first, last uint64, err error)
	// Read calls fn with the Group's events after a sequence, in order,
	// at most max of them (max <= 0: all), until fn returns false. A read
	// from below the online log returns an error matching ErrTrimmed.
	Read(ctx context.Context, groupID string, after uint64, max int, fn func(seq uint64, raw []byte) bool) error
	// Trim deletes the Group's events below first (retention, once a
	// snapshot covers them); first may not pass the last sequence + 1.
	Trim(ctx context.Context, groupID string, first uint64) error
	// Groups lists the Groups with a log, in id order.
	Groups(ctx context.Context) ([]string, error)

	// Receipt returns the receipt stored under key (ErrNotFound if none).
	Receipt(ctx context.Context, key string) ([]byte, error)

	// Get returns a record of the Organization and its revision
	// (ErrNotFound if none).
	Get(ctx context.Context, table Table, key string) (val []byte, rev uint64, err error)
	// Put stores a record if its revision is still rev (0: the record must
	// not exist), else returns an error matching ErrConflict; it returns
	// the new revision.
	Put(ctx context.Context, table Table, key string, val []byte, rev uint64) (uint64, error)
	// Delete removes a record if its revision is still rev.
	Delete(ctx context.Context, table Table, key string, rev uint64) error
	// Records calls fn for every record of a table, in key order.
	Records(ctx context.Context, table Table, fn func(key string, val []byte) error) error

	Close() error
}

// Commit is one command's write.
type Commit struct {
	GroupID string
	// After is the Group's last sequence the command was decided on.
	After    uint64
	Events   [][]byte
	Receipts []Receipt
}

// Receipt is what a retry of a command gets back, under the command's
// receipt key (actor and actionId).
type Receipt struct {
	Key   string
	Value []byte
}

// Table names a kind of Organization record.
type Table string

// The Organization's tables.
const (
	Agents     Table = "agents"     // agentId -> agent card, card hash and session epoch
	Principals Table = "principals" // kind:id -> human or policy service and its keys
	Nonces     Table = "nonces"     // agentId 0 nonce -> accept time (HELLO replay guard)
)

// Tables lists every table, for stores that create them up front.
var Tables = []Table{Agents, Principals, Nonces}

// The errors every store's errors match (errors.Is).
var (
	ErrConflict      = errors.New("logstore: conflict: the Group or record changed since it was read")
	ErrReceiptExists = errors.New("logstore: a receipt is already stored under this key")
	ErrNotFound      = errors.New("logstore: not found")
	ErrTrimmed       = errors.New("logstore: read from below the online log")
	ErrClosed        = errors.New("logstore: closed")
)

// ConflictError is an ErrConflict that says where the Group is now.
type ConflictError struct {
	GroupID string
	Last    uint64
}

func (e *ConflictError) Error() string {
	return "logstore: conflict: group " + e.GroupID + " moved on"
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
