package authoritylite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

// A damaged log must not crash the authority, nor be served as if whole.
//
//   - Every transaction runs under storecheck.Guard: bbolt's panic on a bad
//     page (or a fault past the end of a truncated file) becomes
//     STORE_DAMAGED. A panic while reading one Group's events marks that
//     Group damaged; any other marks the whole log failed, and every later
//     call returns the same error at once.
//   - Open refuses a file shorter than its used pages (bbolt would fault)
//     and a log older than the last commit this authority recorded in
//     DIR/authority.head (LOG_ROLLED_BACK).
//   - Each Group's meta "verified" records how far its events were read
//     back and verified (signature by the event key, key = sequence, no
//     gap), bound to the log by the digest of the event it names
//     (verified.go). Open verifies up to OpenCheckEvents of each Group's
//     events past that mark before serving; a Group that fails is not
//     served (SUBSCRIBE and commands get STORE_DAMAGED), the others are.
//     The rest past the mark is verified in the background, a chunk per
//     read transaction so writers are never held up, and so is what is
//     appended while the authority runs, every VerifyEvery; each pass
//     moves the mark. A mark whose digest does not match the log is
//     ignored: that Group is verified from its first online event.
//   - `authority check` (Check) runs all of it and bbolt's tx.Check on a
//     stopped authority's file.

// HeadFile records the log's last commit outside the log.
const HeadFile = "authority.head"

// DefaultOpenCheckEvents is how many of each Group's newest events Open
// verifies before serving; the rest are verified in the background.
const DefaultOpenCheckEvents = 256

// backgroundChunk is how many events one background read transaction checks.
const backgroundChunk = 1024

// logDB is the authority's store with every transaction guarded.
type logDB struct {
	tree logstore.Tree
	// bolt is the bbolt file under tree, nil on another store.
	bolt *bolt.DB
	// path names the store in errors and log lines: authority.db's path,
	// or the NATS servers'.
	path   string
	log    *slog.Logger
	failed atomic.Pointer[protocol.Error]
}

func (d *logDB) View(fn func(logstore.Tx) error) error {
	if e := d.failed.Load(); e != nil {
		return e
	}
	return d.check(storecheck.Guard(func() error { return d.tree.View(fn) }))
}

func (d *logDB) Update(fn func(logstore.Tx) error) error {
	if e := d.failed.Load(); e != nil {
		return e
	}
	return d.check(storecheck.Guard(func() error { return d.tree.Update(fn) }))
}

func (d *logDB) Close() error { return d.tree.Close() }

// writeTime is bbolt's running total of time spent writing and syncing
// (zero on another store).
func (d *logDB) writeTime() time.Duration {
	if d.bolt == nil {
		return 0
	}
	st := d.bolt.Stats()
	return st.TxStats.GetWriteTime()
}

const logFailed = "the authority's log is damaged; it serves nothing more until it is restored (`mwp-worker authority check`)"

// check turns a caught panic into the log's failure. The error every
// later call returns goes to clients too, so it names no file; the log
// line does.
func (d *logDB) check(err error) error {
	if !storecheck.IsPanic(err) {
		return err
	}
	e := storeError(ReasonStoreDamaged, nil, "%s", logFailed)
	if d.failed.CompareAndSwap(nil, e) {
		d.log.Error("authority log failed: a damaged page", "file", d.path, "err", err)
	}
	return d.failed.Load()
}

// damaged is STORE_DAMAGED for the log at path, or for one Group of it.
func damaged(path, groupID string, err error) *protocol.Error {
	what := path
	if groupID != "" {
		what = fmt.Sprintf("group %s in %s", groupID, path)
	}
	e := storeError(ReasonStoreDamaged, []string{path}, "%s: %v (run `mwp-worker authority check`; docs/operations.md, Damaged stores)", what, err)
	if groupID != "" {
		e = protocol.WithDetails(e, "groupId", groupID)
	}
	return e
}

// integrity is the Service's record of damaged Groups and its background
// verification.
type integrity struct {
	db      *logDB
	log     *slog.Logger
	mu      sync.Mutex
	groups  map[string]*protocol.Error
	cancel  context.CancelFunc
	done    chan struct{}
	first   chan struct{} // closed when the first pass ends
	checked atomic.Int64  // events verified in the background
	// opened counts the events Open verified before serving; mismatched
	// the Groups whose mark did not match the log.
	opened     atomic.Int64
	mismatched atomic.Int64
	// passes counts finished background passes.
	passes atomic.Int64
}

// damage returns the error a damaged Group answers with (on the wire
// too: it names no file), nil if sound.
func (in *integrity) damage(groupID string) error {
	if e := in.db.failed.Load(); e != nil {
		return protocol.WithDetails(storeError(ReasonStoreDamaged, nil, "%s", logFailed), "groupId", groupID)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.groups[groupID] != nil {
		return groupDamaged(groupID)
	}
	return nil
}

func groupDamaged(groupID string) *protocol.Error {
	return protocol.WithDetails(storeError(ReasonStoreDamaged, nil,
		"group %s is not served: its stored events are damaged (`mwp-worker authority check` names them)", groupID), "groupId", groupID)
}

// mark stops serving a Group; the first reason is kept and logged.
// It returns the error the Group answers with.
func (in *integrity) mark(groupID string, err error) *protocol.Error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.groups[groupID] == nil {
		in.groups[groupID] = damaged(in.db.path, groupID, err)
		in.log.Error("group not served: its stored events are damaged", "group", groupID, "file", in.db.path, "err", err)
	}
	return groupDamaged(groupID)
}

// damagedGroups lists the Groups not served because their store is damaged.
func (in *integrity) damagedGroups() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Sorted(maps.Keys(in.groups))
}

// view is a read of one Group's buckets: a panic in it marks that
// Group damaged instead of the whole log.
func (in *integrity) view(groupID string, fn func(logstore.Tx) error) error {
	if err := in.damage(groupID); err != nil {
		return err
	}
	err := storecheck.Guard(func() error { return in.db.tree.View(fn) })
	if storecheck.IsPanic(err) {
		return in.mark(groupID, err)
	}
	return err
}

// preOpen refuses a file bbolt must not map: truncated below its used
// pages, or with no valid meta page. A missing file passes.
func preOpen(path string) (storecheck.Metas, error) {
	ms, err := storecheck.ReadMeta(path)
	if errors.Is(err, os.ErrNotExist) {
		return ms, nil
	}
	if err != nil {
		return ms, fmt.Errorf("authority: %w", err)
	}
	if ms.FileSize == 0 {
		return ms, nil
	}
	if ms.Used < 0 || ms.Truncated() {
		return ms, damaged(path, "", errors.New(strings.Join(ms.Problems(), "; ")))
	}
	return ms, nil
}

// head is DIR/authority.head: "<logId> <txid>\n", rewritten in place after
// every commit, never fsynced. It may lag the log (a crash before it is
// written, a power loss) but is never ahead of it, so a log older than
// its head has lost commits: a damaged newest meta page, or a copy
// restored over it.
type head struct {
	f  *os.File
	id string
}

func headPath(dir string) string { return filepath.Join(dir, HeadFile) }

func readHead(dir string) (logID string, txid uint64, ok bool) {
	raw, err := os.ReadFile(headPath(dir))
	if err != nil {
		return "", 0, false
	}
	f := strings.Fields(string(raw))
	if len(f) != 2 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return f[0], n, true
}

// checkHead refuses a log older than its head.
func checkHead(dir string, id LogIdentity, txid uint64) error {
	logID, last, ok := readHead(dir)
	if !ok || logID != id.LogID || txid >= last {
		return nil
	}
	logPath, hp := filepath.Join(dir, LogFile), headPath(dir)
	return storeError(ReasonLogRolledBack, []string{logPath, hp},
		"%s opens at transaction %d, but %s records transaction %d committed: the log lost its last %d commits (a damaged meta page, or an older copy put in its place); restore a whole backup, or if this copy was restored on purpose remove %s",
		logPath, txid, hp, last, last-txid, hp)
}

func openHead(dir, logID string) (*head, error) {
	f, err := os.OpenFile(headPath(dir), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("authority: %w", err)
	}
	return &head{f: f, id: logID}, nil
}

// record writes txid; a fixed width keeps the rewrite in place.
func (h *head) record(txid uint64) {
	if h == nil {
		return
	}
	_, _ = h.f.WriteAt(fmt.Appendf(nil, "%s %020d\n", h.id, txid), 0)
}

func (h *head) close() {
	if h != nil {
		h.f.Close()
	}
}

// runErr is the first problem of a run, as an error.
func runErr(r *storecheck.Run) error {
	if !r.Damaged() {
		return nil
	}
	_, ps := r.Report()
	p := ps[0]
	return fmt.Errorf("event %d: %s", p.Sequence, p.What)
}

// stopBackgroundCheck is safe before start and twice.
func (s *Service) stopBackgroundCheck() {
	if s.integrity.cancel != nil {
		s.integrity.cancel()
		<-s.integrity.done
	}
}

// BackgroundCheckDone reports whether the background verification's first
// pass, the one past the marks found at Open, ended (finished or
// stopped), for tests and status.
func (s *Service) BackgroundCheckDone() bool {
	if s.integrity.first == nil {
		return true
	}
	select {
	case <-s.integrity.first:
		return true
	default:
		return false
	}
}
