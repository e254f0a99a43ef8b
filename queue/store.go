package queue

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

// FileName is the store file inside the worker's data directory.
const FileName = "worker.db"

// SocketName is the Unix socket inside the data directory through which a
// running worker serves consistent copies of its store to `inspect`.
const SocketName = "worker.sock"

// SchemaVersion is the layout version this code reads and writes.
const SchemaVersion = 1

// ErrSchema is returned by Open for a store written with another layout.
var ErrSchema = errors.New("queue: unsupported store schema version")

// ErrLocked is returned by Open when another process holds the store's
// file lock: a worker already runs on the data directory.
var ErrLocked = errors.New("queue: the store is held by another process")

// lockedError names the process holding dir's store when it is a worker
// serving its socket.
func lockedError(dir string, err error) error {
	path := filepath.Join(dir, FileName)
	if pid, ok := holderPID(dir); ok {
		return fmt.Errorf("%w: %s is locked by process %d (a worker running on this data directory): %w", ErrLocked, path, pid, err)
	}
	if _, who, ok := storecheck.Holder(path); ok { // one without a socket: inspect, check
		return fmt.Errorf("%w: %s is locked by %s: %w", ErrLocked, path, who, err)
	}
	return fmt.Errorf("%w: %s is locked (a worker or inspect using this data directory?): %w", ErrLocked, path, err)
}

// ErrClosed is returned by a closed Store.
var ErrClosed = errors.New("queue: store is closed")

// Default bounds of the per-Group reorder buffer.
const (
	DefaultMaxBufferedEvents = 4096
	DefaultMaxBufferedBytes  = 16 << 20
)

// Options tune a Store. The zero value is ready for production.
type Options struct {
	// Bounds of each Group's out-of-order buffer; past them events are
	// dropped and reported so the caller re-fetches them by replay.
	MaxBufferedEvents int
	MaxBufferedBytes  int
	// Clock stamps outbox records; nil means the system clock.
	Clock clock.Clock
	// NoPopulate skips MAP_POPULATE, which otherwise reads the whole file
	// into the page cache at open so start-up replay is not 36× slower from
	// a cold cache (docs/performance.md).
	NoPopulate bool
	// NoSync turns off fsync. Tests and benchmarks only: a crash may lose
	// or corrupt the store.
	NoSync bool
	// NoSocket does not serve snapshots to inspect.
	NoSocket bool
	// PruneTail is how many newest events each Group's inbox keeps
	// (TailEvents when 0, never fewer than MinTailEvents); PruneEvery how
	// many more it gathers before they are pruned (PruneEvery when 0).
	// NoPrune keeps every event (tests comparing against full replay).
	PruneTail  int
	PruneEvery int
	NoPrune    bool
	// LiveStatus, when set, is what the socket reports of the process
	// besides the store (`mwp-worker status`); it must be safe to call
	// from any goroutine.
	LiveStatus func() any
}

// Store is the worker's durable store: one bbolt file for every Group. It
// is safe for concurrent use; writers are serialized.
type Store struct {
	db   *bolt.DB
	dir  string
	opts Options

	wmu    sync.Mutex   // serializes writers; held across their transaction
	mu     sync.RWMutex // guards groups and closed; written only with wmu held
	groups map[string]*groupState
	closed bool
	// outbox holds the actionIds in the outbox bucket, so a removal of
	// one it does not hold (answered already) costs no transaction.
	outbox map[string]bool
	// forgotten holds the ids of the forgotten Groups (forget.go).
	forgotten map[string]bool

	ln       net.Listener
	sockPath string
	wg       sync.WaitGroup

	// failed is set by the first panic caught on a damaged page.
	failed atomic.Pointer[protocol.Error]

	commits atomic.Int64 // write transactions of Commit, for group-commit tests
	// failApply, when set (tests only), runs at the end of Apply's
	// transaction; an error rolls everything back like a crash would.
	failApply func() error
}

// Bucket names (see doc.go for the tree).
var (
	bktMeta        = []byte("meta")
	bktGroups      = []byte("groups")
	bktOrg         = []byte("org")
	bktOutbox      = []byte("outbox")
	bktOutboxIndex = []byte("outboxIndex")
	bktInbox       = []byte("inbox")
	bktQueue       = []byte("queue")

	// Reserved for the packages that own them; created here so the
	// layout is fixed in one place.
	bktOffline     = []byte("offline")
	bktCheckpoints = []byte("checkpoints")
	bktToolkeys    = []byte("toolkeys")
	bktNotices     = []byte("notices")
	bktObserved    = []byte("observed")

	keySchema      = []byte("schema")
	keyCursor      = []byte("cursor")
	keyBase        = []byte("base")
	keySnapshot    = []byte("snapshot")
	keySnapshotRef = []byte("snapshotRef")
	keyMission     = []byte("mission")
	keyMembers     = []byte("members")
	keyProjection  = []byte("projection")
)

// ProjectionVersion names how this build projects events; see doc.go.
// 2: memberships are projected. 3: a Mission's priority class is also read
// from a nested mission record. 4: an offer's expiry is read from
// offerExpiresAt. 5: Mission and WorkItem state by group.Fold (entries
// carry the folded record). 6: Context Packages are followed (ContextSeq).
const ProjectionVersion = 6

// ReservedBuckets are the top-level buckets other packages own: offline/,
// checkpoint/ and toolkeys/ keep their records there through DB().
var ReservedBuckets = []string{string(bktOffline), string(bktCheckpoints), string(bktToolkeys), string(bktNotices), string(bktObserved)}

// Open opens (creating if needed) DIR/worker.db for reading and writing,
// checks its schema version, loads every Group's cursor and projection, and
// starts serving snapshots on DIR/worker.sock for inspect. A second Open of
// the same directory waits up to one second for the file lock, then fails.
func Open(dir string, opts Options) (*Store, error) {
	if opts.MaxBufferedEvents <= 0 {
		opts.MaxBufferedEvents = DefaultMaxBufferedEvents
	}
	if opts.MaxBufferedBytes <= 0 {
		opts.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	bo := &bolt.Options{Timeout: time.Second, NoSync: opts.NoSync, FreelistType: bolt.FreelistMapType}
	if !opts.NoPopulate {
		bo.MmapFlags = mmapPopulate
	}
	path := filepath.Join(dir, FileName)
	if err := preOpen(path); err != nil {
		return nil, err
	}
	db, err := storecheck.Open(path, 0o600, bo)
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, lockedError(dir, err)
	}
	if err != nil {
		return nil, openErr(path, err)
	}
	if err := checkPages(path); err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{db: db, dir: dir, opts: opts, groups: make(map[string]*groupState), outbox: make(map[string]bool), forgotten: make(map[string]bool)}
	if err := s.update(initLayout); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.view(func(tx *bolt.Tx) error {
		if err := checkTails(tx, OpenCheckEvents); err != nil {
			return damaged(path, err)
		}
		if err := s.load(tx); err != nil {
			return damaged(path, err) // records that do not decode
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.upgradeProjection(); err != nil {
		db.Close()
		return nil, err
	}
	if !opts.NoSocket {
		if err := s.serve(); err != nil {
			db.Close()
			return nil, err
		}
	}
	return s, nil
}

// initLayout creates the top-level buckets and the schema key of a new
// file, and refuses a file of another schema.
func initLayout(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bktMeta)
	if err != nil {
		return err
	}
	if v := meta.Get(keySchema); v != nil {
		if len(v) != 8 || binary.BigEndian.Uint64(v) != SchemaVersion {
			return fmt.Errorf("%w: file has %x, this build reads %d", ErrSchema, v, SchemaVersion)
		}
	} else if err := meta.Put(keySchema, u64(SchemaVersion)); err != nil {
		return err
	}
	for _, name := range [][]byte{bktGroups, bktOrg, bktOutbox, bktOutboxIndex, bktOffline, bktCheckpoints, bktToolkeys, bktNotices, bktObserved, bktForgotten} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// checkSchema is initLayout for read-only opens.
func checkSchema(tx *bolt.Tx) error {
	meta := tx.Bucket(bktMeta)
	if meta == nil {
		return fmt.Errorf("%w: no meta bucket (not a worker store)", ErrSchema)
	}
	v := meta.Get(keySchema)
	if len(v) != 8 || binary.BigEndian.Uint64(v) != SchemaVersion {
		return fmt.Errorf("%w: file has %x, this build reads %d", ErrSchema, v, SchemaVersion)
	}
	return nil
}

// upgradeProjection rebuilds every Group when the file's projection was
// written by a build that projects differently, then records this build's
// version.
func (s *Store) upgradeProjection() error {
	var current bool
	if err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bktMeta).Get(keyProjection)
		current = len(v) == 8 && getU64(v) == ProjectionVersion
		return nil
	}); err != nil || current {
		return err
	}
	if err := s.resetPrunedElsewhere(); err != nil {
		return fmt.Errorf("queue: upgrade projection to version %d: %w", ProjectionVersion, err)
	}
	if len(s.groups) > 0 {
		if err := s.Rebuild(); err != nil {
			return fmt.Errorf("queue: upgrade projection to version %d: %w", ProjectionVersion, err)
		}
	}
	return s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktMeta).Put(keyProjection, u64(ProjectionVersion))
	})
}

// load reads every Group's meta and projection, and the outbox's
// actionIds, into memory.
func (s *Store) load(tx *bolt.Tx) error {
	if err := s.loadForgotten(tx); err != nil {
		return err
	}
	if err := tx.Bucket(bktOutboxIndex).ForEach(func(k, _ []byte) error {
		s.outbox[string(k)] = true
		return nil
	}); err != nil {
		return err
	}
	return tx.Bucket(bktGroups).ForEachBucket(func(name []byte) error {
		g, err := loadGroup(tx.Bucket(bktGroups).Bucket(name), string(name))
		if err != nil {
			return err
		}
		s.groups[g.id] = g
		return nil
	})
}

func loadGroup(gb *bolt.Bucket, id string) (*groupState, error) {
	g := newGroupState(id)
	meta := gb.Bucket(bktMeta)
	if meta == nil {
		return nil, fmt.Errorf("queue: group %s has no meta bucket", id)
	}
	g.cursor = getU64(meta.Get(keyCursor))
	g.base = getU64(meta.Get(keyBase))
	d, err := loadDivergence(meta)
	if err != nil {
		return nil, fmt.Errorf("queue: group %s: %w", id, err)
	}
	g.diverged = d
	if v := meta.Get(keySnapshotRef); v != nil {
		var ref protocol.SnapshotRef
		if err := json.Unmarshal(v, &ref); err != nil {
			return nil, fmt.Errorf("queue: group %s snapshot ref: %w", id, err)
		}
		g.snapRef = &ref
	}
	if v := meta.Get(keyMission); v != nil {
		if err := unmarshal(v, &g.mis); err != nil {
			return nil, fmt.Errorf("queue: group %s mission: %w", id, err)
		}
	}
	if v := meta.Get(keyMembers); v != nil {
		var ms []Member
		if err := json.Unmarshal(v, &ms); err != nil {
			return nil, fmt.Errorf("queue: group %s members: %w", id, err)
		}
		for _, m := range ms {
			g.members[memberKey(m.Principal)] = m
		}
	}
	if err := fillRecent(&g.recent, gb); err != nil {
		return nil, fmt.Errorf("queue: group %s inbox tail: %w", id, err)
	}
	if q := gb.Bucket(bktQueue); q != nil {
		// Entries decode on every core, and are indexed in key order.
		type loaded struct {
			e   *Entry
			err error
		}
		c := q.Cursor()
		k, v := c.First()
		values := func() ([]byte, []byte, bool) {
			rk, rv := k, v
			k, v = c.Next()
			return rk, rv, rk != nil
		}
		var first error
		decodeAhead(values, func(k, v []byte) loaded {
			e := new(Entry)
			if err := e.UnmarshalJSON(v); err != nil {
				return loaded{err: fmt.Errorf("queue: group %s item %s: %w", id, k, err)}
			}
			return loaded{e: e}
		}, func(l loaded) {
			switch {
			case first != nil:
			case l.err != nil:
				first = l.err
			default:
				g.items[l.e.WorkItemID] = l.e
				g.index(l.e)
			}
		})
		if first != nil {
			return nil, first
		}
	}
	return g, nil
}

// Close stops serving snapshots and closes the file. It is safe to call
// twice.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
		s.wg.Wait()
		os.Remove(s.sockPath)
	}
	return s.db.Close()
}

// DB returns the underlying bbolt handle for the packages that own the
// reserved buckets (ReservedBuckets). They must not touch the others.
func (s *Store) DB() *bolt.DB { return s.db }

// Dir returns the data directory.
func (s *Store) Dir() string { return s.dir }

// groupBuckets returns (creating) the buckets of Group id.
func groupBuckets(tx *bolt.Tx, id string) (gb, meta, inbox, queue *bolt.Bucket, err error) {
	if gb, err = tx.Bucket(bktGroups).CreateBucketIfNotExists([]byte(id)); err != nil {
		return
	}
	if meta, err = gb.CreateBucketIfNotExists(bktMeta); err != nil {
		return
	}
	if inbox, err = gb.CreateBucketIfNotExists(bktInbox); err != nil {
		return
	}
	// Sequences only grow: fill pages before splitting instead of bbolt's
	// half, so an append rewrites one leaf, not two half-empty ones.
	inbox.FillPercent = 1.0
	queue, err = gb.CreateBucketIfNotExists(bktQueue)
	return
}

// writeProjection stores the overlay's changed entries, mission view and
// memberships (all of a Group's memberships as one value: a handful).
func writeProjection(meta, queue *bolt.Bucket, o *overlay) error {
	if len(o.members) > 0 {
		b, err := json.Marshal(sortedMembers(o.allMembers()))
		if err != nil {
			return err
		}
		if err := meta.Put(keyMembers, b); err != nil {
			return err
		}
	}
	for _, id := range o.changedIDs() {
		// MarshalJSON itself, not json.Marshal: the same bytes without
		// encoding/json's second pass over them (it compacts a
		// Marshaler's output, already compact).
		b, err := o.items[id].MarshalJSON()
		if err != nil {
			return fmt.Errorf("queue: encode item %s: %w", id, err)
		}
		if err := queue.Put([]byte(id), b); err != nil {
			return err
		}
	}
	if o.mis != nil {
		b, err := json.Marshal(o.mis)
		if err != nil {
			return err
		}
		return meta.Put(keyMission, b)
	}
	return nil
}

// Cursors returns every Group's durable cursor, sorted by Group id: the
// afterSequence of each SUBSCRIBE position and the values to ACK.
func (s *Store) Cursors() []protocol.Cursor {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]protocol.Cursor, 0, len(s.groups))
	for _, g := range s.groups {
		out = append(out, protocol.Cursor{GroupID: g.id, Sequence: g.cursor})
	}
	slices.SortFunc(out, func(a, b protocol.Cursor) int { return cmp.Compare(a.GroupID, b.GroupID) })
	return out
}

// Cursor returns Group id's durable cursor (0 for an unknown Group).
func (s *Store) Cursor(groupID string) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if g := s.groups[groupID]; g != nil {
		return g.cursor
	}
	return 0
}

// Items returns the view of every WorkItem of a Group, sorted by id.
func (s *Store) Items(groupID string) []Entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups[groupID]
	if g == nil {
		return nil
	}
	out := make([]Entry, 0, len(g.items))
	for _, id := range g.itemIDs() {
		out = append(out, *g.items[id])
	}
	return out
}

// Item returns the view of one WorkItem.
func (s *Store) Item(groupID, workItemID string) (Entry, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if g := s.groups[groupID]; g != nil {
		if e := g.items[workItemID]; e != nil {
			return *e, true
		}
	}
	return Entry{}, false
}

// Mission returns the view of a Group's Mission.
func (s *Store) Mission(groupID string) (MissionView, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if g := s.groups[groupID]; g != nil {
		return g.mis, true
	}
	return MissionView{}, false
}

// GroupIDs lists the known Groups, sorted.
func (s *Store) GroupIDs() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]string, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// BufferStatus describes a Group's reorder buffer.
type BufferStatus struct {
	GroupID string `json:"groupId"`
	Cursor  uint64 `json:"cursor"`
	Events  int    `json:"events"`
	Bytes   int    `json:"bytes"`
	// FirstHeld is the lowest held sequence; the gap is (Cursor, FirstHeld).
	FirstHeld uint64 `json:"firstHeld,omitempty"`
}

// Buffers reports every Group's reorder buffer that holds events.
func (s *Store) Buffers() []BufferStatus {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []BufferStatus
	for _, g := range s.groups {
		if len(g.buf.evs) > 0 {
			out = append(out, BufferStatus{GroupID: g.id, Cursor: g.cursor, Events: len(g.buf.evs), Bytes: g.buf.bytes, FirstHeld: g.buf.first()})
		}
	}
	slices.SortFunc(out, func(a, b BufferStatus) int { return cmp.Compare(a.GroupID, b.GroupID) })
	return out
}

// Event returns the inbox bytes of one applied event.
func (s *Store) Event(groupID string, seq uint64) ([]byte, error) {
	var out []byte
	err := s.view(func(tx *bolt.Tx) error {
		gb := tx.Bucket(bktGroups).Bucket([]byte(groupID))
		if gb == nil {
			return fmt.Errorf("queue: unknown group %s", groupID)
		}
		v := gb.Bucket(bktInbox).Get(u64(seq))
		if v == nil {
			return fmt.Errorf("queue: group %s has no event %d in its inbox", groupID, seq)
		}
		out = slices.Clone(v)
		return nil
	})
	return out, err
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
