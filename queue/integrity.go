package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

// A damaged worker store must fail with a clear error, never a panic: bbolt
// panics on a bad page (and faults on a page past the end of a truncated
// file), so every transaction of the Store and the Reader runs under
// storecheck.Guard. The first caught panic marks the Store failed: every
// later call returns the same STORE_DAMAGED error at once. The store is a
// projection of the authority's log, so the remedy is to delete it and
// let the worker rebuild it by replay (docs/operations.md, Damaged stores).
//
// Open also refuses a file shorter than its used pages, and a Group whose
// newest OpenCheckEvents inbox keys have a gap or whose cursor is not its
// last stored event. `mwp-worker check` (Check) verifies everything,
// signatures included when given the authority's key.

// ReasonStoreDamaged is details.reason of the error a damaged store gives.
const ReasonStoreDamaged = "STORE_DAMAGED"

// OpenCheckEvents is how many of each Group's newest inbox keys Open checks.
const OpenCheckEvents = 256

// damaged is STORE_DAMAGED for the store file at path: INTERNAL_ERROR, not
// retryable, with the reason and the file in details.
func damaged(path string, err error) *protocol.Error {
	e := protocol.Errorf(protocol.CodeInternalError, "%s: %s: %v; the worker store is rebuilt from the authority: stop the worker, move %s away and start it again (docs/operations.md, Damaged stores)",
		ReasonStoreDamaged, path, err, path)
	e.Retryable = false
	return protocol.WithDetails(e, "reason", ReasonStoreDamaged, "files", []string{path})
}

func (s *Store) path() string { return filepath.Join(s.dir, FileName) }

// view and update are db.View and db.Update, guarded.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	return s.guard(func() error { return s.db.View(fn) })
}

func (s *Store) update(fn func(*bolt.Tx) error) error {
	return s.guard(func() error { return s.db.Update(fn) })
}

func (s *Store) guard(fn func() error) error {
	if e := s.failed.Load(); e != nil {
		return e
	}
	err := storecheck.Guard(fn)
	if storecheck.IsPanic(err) {
		s.failed.CompareAndSwap(nil, damaged(s.path(), err))
		return s.failed.Load()
	}
	return err
}

// Failed returns the error of a store that met a damaged page, nil if none.
func (s *Store) Failed() error {
	if e := s.failed.Load(); e != nil {
		return e
	}
	return nil
}

// preOpen refuses a file bbolt must not map, by the rule `mwp-worker
// check` applies (storecheck.Metas.Problems): shorter than its used pages,
// or with no valid meta page, a 0-byte file included (bbolt would start it
// afresh, and the events, outbox and checkpoints it held would be gone
// unsaid). Only a missing file is a new store.
func preOpen(path string) error {
	ms, err := storecheck.ReadMeta(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if ms.Used < 0 || ms.Truncated() {
		return damaged(path, errors.New(strings.Join(ms.Problems(), "; ")))
	}
	return nil
}

// checkPages walks the whole page tree from the file (storecheck.Pages)
// once the file lock is held: a bad page anywhere, also in the buckets of
// offline/, checkpoint/ and toolkeys/ that read the file without this
// package's guard, refuses the store at start instead of crashing later.
// It reads the file once more, as MAP_POPULATE already does.
func checkPages(path string) error {
	ms, err := storecheck.ReadMeta(path)
	if err != nil {
		return err
	}
	if ps := storecheck.Pages(path, ms); len(ps) > 0 {
		return damaged(path, fmt.Errorf("%s (%d problem(s); `mwp-worker check` lists them)", ps[0], len(ps)))
	}
	return nil
}

// openErr maps bbolt's refusals of a damaged file to STORE_DAMAGED.
func openErr(path string, err error) error {
	if storecheck.IsPanic(err) || errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
		return damaged(path, err)
	}
	return fmt.Errorf("queue: open %s: %w", path, err)
}

// checkTails checks each Group's newest n inbox keys: consecutive, the
// last one the cursor (or, empty, the cursor at the restored base).
func checkTails(tx *bolt.Tx, n int) error {
	return tx.Bucket(bktGroups).ForEachBucket(func(name []byte) error {
		gb := tx.Bucket(bktGroups).Bucket(name)
		meta, in := gb.Bucket(bktMeta), gb.Bucket(bktInbox)
		if meta == nil || in == nil {
			return nil
		}
		cursor, base := getU64(meta.Get(keyCursor)), getU64(meta.Get(keyBase))
		c := in.Cursor()
		k, _ := c.Last()
		if k == nil {
			if cursor != base {
				return fmt.Errorf("group %s: cursor %d but no event stored after the base %d", name, cursor, base)
			}
			return nil
		}
		if last := getU64(k); last != cursor || len(k) != 8 {
			return fmt.Errorf("group %s: cursor %d, last stored event %d", name, cursor, last)
		}
		prev := getU64(k)
		for i := 1; i < n; i++ {
			if k, _ = c.Prev(); k == nil {
				break
			}
			if seq := getU64(k); len(k) != 8 || seq != prev-1 {
				return fmt.Errorf("group %s: stored event %d follows %d", name, prev, seq)
			}
			prev--
		}
		return nil
	})
}

// Check verifies the worker store in dir in full and reports what is
// wrong: its meta pages, bbolt's structural check, and every Group's inbox
// (consecutive sequences from the base, each event decoding and, with
// keys, verifying, the cursor at the last stored event) and the
// Organization events. Damage is reported, not returned; an error means
// the check could not run. While a worker runs, the check reads the copy
// it serves (see OpenReader), and the meta pages of the file itself.
func Check(dir string, keys protocol.KeyResolver, timeout time.Duration) (rep storecheck.Report, err error) {
	path := filepath.Join(dir, FileName)
	rep = storecheck.Report{Path: path, Store: "worker", SignaturesChecked: keys != nil}
	defer rep.Finish()
	ms, err := storecheck.ReadMeta(path)
	if err != nil {
		return rep, fmt.Errorf("queue: no worker store: %w", err)
	}
	rep.Meta = ms
	for _, p := range ms.Problems() {
		rep.Add(storecheck.Problem{Where: "meta", What: p})
	}
	if ms.Used < 0 || ms.Truncated() {
		return rep, nil
	}
	if keys == nil {
		rep.Notes = append(rep.Notes, "signatures not checked: no authority key (--authority-key)")
	}
	r, err := OpenReader(dir, timeout)
	if err != nil {
		if protocol.CodeOf(err) == protocol.CodeInternalError {
			rep.Add(storecheck.Problem{Where: "file", What: err.Error()})
			return rep, nil
		}
		return rep, err
	}
	defer r.Close()
	if r.Live() {
		rep.Notes = append(rep.Notes, fmt.Sprintf("read from the copy served by the running worker, pid %d", r.live.PID))
	}
	opened, oms := path, ms
	if r.tmp != "" {
		opened = r.tmp
		if oms, err = storecheck.ReadMeta(opened); err != nil {
			return rep, err
		}
	}
	structure := storecheck.Pages(opened, oms)
	if len(structure) == 0 {
		err = storecheck.Guard(func() error {
			return r.db.View(func(tx *bolt.Tx) error { structure = storecheck.Structure(tx); return nil })
		})
		rep.StructureChecked = err == nil
		if err != nil {
			rep.Add(storecheck.Problem{Where: "structure", What: err.Error()})
		}
	}
	for _, p := range structure {
		rep.Add(storecheck.Problem{Where: "structure", What: p})
	}
	var ids []string
	if err := r.view(func(tx *bolt.Tx) error {
		if err := checkSchema(tx); err != nil {
			return err
		}
		return tx.Bucket(bktGroups).ForEachBucket(func(k []byte) error { ids = append(ids, string(k)); return nil })
	}); err != nil {
		rep.Add(storecheck.Problem{Where: "file", What: err.Error()})
		return rep, nil
	}
	for _, id := range ids {
		run := storecheck.Run{GroupID: id, Keys: keys}
		var cursor uint64
		var diverged *Divergence
		err := r.view(func(tx *bolt.Tx) error {
			gb := tx.Bucket(bktGroups).Bucket([]byte(id))
			meta, in := gb.Bucket(bktMeta), gb.Bucket(bktInbox)
			if meta == nil || in == nil {
				return fmt.Errorf("group %s lacks its meta or inbox bucket", id)
			}
			cursor = getU64(meta.Get(keyCursor))
			if d, err := loadDivergence(meta); err != nil {
				run.Fail(0, "%v", err)
			} else {
				diverged = d
			}
			base := getU64(meta.Get(keyBase))
			run.Next = base + 1
			c := in.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				run.Add(k, v)
			}
			if top := max(run.Last, base); cursor != top {
				run.Fail(cursor, "cursor %d, but the events stored run to %d (base %d)", cursor, top, base)
			}
			return nil
		})
		if err != nil {
			run.Fail(0, "%v", err)
		}
		gr, ps := run.Report()
		gr.Cursor = &cursor
		if d := diverged; d != nil {
			gr.Diverged = fmt.Sprintf("at sequence %d (%s)", d.Sequence, d.Describe())
			ps = append(ps, storecheck.Problem{Where: "group", GroupID: id, Sequence: d.Sequence,
				What: "diverged " + gr.Diverged + ": the authority's log is not the history this store applied; resync the Group (docs/operations.md \"A Group diverged\")"})
		}
		rep.Groups = append(rep.Groups, gr)
		rep.Problems = append(rep.Problems, ps...)
	}
	if err := r.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bktOrg).ForEach(func(k, v []byte) error {
			rep.OrgEvents++
			if _, err := storecheck.Event(v, keys); err != nil && len(rep.Problems) < storecheck.MaxProblems {
				rep.Add(storecheck.Problem{Where: "org", What: fmt.Sprintf("event %s: %v", k, err)})
			}
			return nil
		})
	}); err != nil {
		rep.Add(storecheck.Problem{Where: "org", What: err.Error()})
	}
	return rep, nil
}

// view is the Reader's guarded read.
func (r *Reader) view(fn func(*bolt.Tx) error) error {
	err := storecheck.Guard(func() error { return r.db.View(fn) })
	if storecheck.IsPanic(err) {
		return damaged(r.path, err)
	}
	return err
}
