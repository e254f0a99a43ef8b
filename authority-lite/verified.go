package authoritylite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

// How far each Group's log was verified survives a restart, so a restart
// verifies what is new, not the whole history.
//
//	groups/<groupId>/meta "verified"   sequence (8 bytes BE) || sha256 of the stored event at it
//
// The mark says: every online event up to this sequence was read back from
// the log and verified. The digest binds it to the log: a mark whose event
// is not there, or hashes differently (the file was replaced by another
// log, a restored copy, an edit), is ignored and the Group is verified
// from its first online event. Damage inside the verified region is not
// looked for at start; `authority check` reads every event.

var keyVerified = []byte("verified")

// DefaultVerifyEvery is how often the background verifies what was
// appended since its last pass and moves the marks.
const DefaultVerifyEvery = time.Minute

// markEvery bounds the events verified between two mark writes of one
// Group, so a long first pass stopped midway keeps most of its work.
const markEvery = 64 * backgroundChunk

func encodeMark(seq uint64, raw []byte) []byte {
	d := sha256.Sum256(raw)
	out := make([]byte, 8, 8+len(d))
	binary.BigEndian.PutUint64(out, seq)
	return append(out, d[:]...)
}

// markFrom is the first sequence of the Group the mark does not cover:
// past the mark when the mark's event is online and hashes to its digest,
// else the first online event. mismatch reports a mark that names an
// event the log does not hold as recorded (a mark below the online log,
// left behind by a compaction, is no mismatch).
func markFrom(gb *groupBuckets) (from uint64, mismatch bool) {
	first, _ := onlineFrom(gb)
	v := gb.meta.Get(keyVerified)
	if v == nil {
		return first, false
	}
	if len(v) != 8+sha256.Size {
		return first, true
	}
	seq := binary.BigEndian.Uint64(v)
	if seq < first {
		return first, false
	}
	raw := gb.events.Get(seqKey(seq))
	if raw == nil {
		return first, true
	}
	if d := sha256.Sum256(raw); !bytes.Equal(d[:], v[8:]) {
		return first, true
	}
	return seq + 1, false
}

// verifyTail runs before the Service serves: for each Group it reads the
// mark and verifies up to n of the newest events past it. What lies
// between the mark and those is left to the background.
func (s *Service) verifyTail(n int) {
	keys := protocol.NewKeySet(s.key.Public())
	// A released archived Group takes no events: the background reads its
	// mark and verifies it.
	for _, id := range s.loadedGroupIDs() {
		gs := s.rawGroup(id)
		if s.integrity.damage(id) != nil {
			continue
		}
		err := s.integrity.view(id, func(tx logstore.Tx) error {
			gb, err := openGroupBuckets(tx, id, false)
			if err != nil || gb == nil {
				return fmt.Errorf("buckets: %v", err)
			}
			from, mismatch := markFrom(gb)
			if mismatch {
				s.integrity.mismatched.Add(1)
				s.log.Warn("the Group's verification mark does not match its log; verifying it from its first online event", "group", id, "from", from)
			}
			gs.verified.Store(from - 1)
			gs.markRead.Store(true)
			last := lastSeq(gb.events)
			if last < from {
				return nil
			}
			start := from
			if last-from >= uint64(n) {
				start = last - uint64(n) + 1
			}
			run := storecheck.Run{GroupID: id, Keys: keys, Next: start}
			c := gb.events.Cursor()
			for k, v := c.Seek(seqKey(start)); k != nil; k, v = c.Next() {
				run.Add(k, v)
			}
			s.integrity.opened.Add(int64(run.Count))
			if run.Count == 0 || run.Last != last {
				run.Fail(last, "events %d..%d are missing", start, last)
			}
			return runErr(&run)
		})
		if err != nil && s.integrity.damage(id) == nil {
			s.integrity.mark(id, err)
		}
	}
}

// startBackgroundCheck verifies, Group by Group and a chunk per read
// transaction, the events past each mark, then again every VerifyEvery
// what was appended since, until Close.
func (s *Service) startBackgroundCheck() {
	ctx, cancel := context.WithCancel(context.Background())
	s.integrity.cancel, s.integrity.done = cancel, make(chan struct{})
	first := make(chan struct{})
	s.integrity.first = first
	every := s.cfg.VerifyEvery
	if every <= 0 {
		every = DefaultVerifyEvery
	}
	go func() {
		defer close(s.integrity.done)
		firstDone := sync.OnceFunc(func() { close(first) })
		defer firstDone()
		damagedBefore := len(s.integrity.damagedGroups())
		s.fillStubs(ctx)
		s.verifyPass(ctx)
		firstDone()
		if ctx.Err() == nil && s.integrity.checked.Load() > 0 {
			s.log.Info("background integrity check finished", "events", s.integrity.checked.Load(),
				"newlyDamagedGroups", len(s.integrity.damagedGroups())-damagedBefore)
		}
		for ctx.Err() == nil {
			t := newTimer(s.clock, every)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			s.verifyPass(ctx)
		}
	}()
}

func newTimer(c clock.Clock, d time.Duration) clock.Timer {
	if t, ok := c.(clock.Timers); ok {
		return t.NewTimer(d)
	}
	return clock.Real{}.NewTimer(d)
}

// verifyPass verifies every Group's durable events past its mark and
// moves the mark. It returns how many events it verified.
func (s *Service) verifyPass(ctx context.Context) int64 {
	keys := protocol.NewKeySet(s.key.Public())
	var total int64
	for _, id := range s.GroupIDs() {
		if ctx.Err() != nil {
			break
		}
		gs := s.peekGroup(id)
		if gs == nil || s.integrity.damage(id) != nil {
			continue
		}
		total += s.verifyGroup(ctx, gs, keys)
	}
	s.integrity.passes.Add(1)
	return total
}

// verifyGroup verifies one Group past its mark, a chunk per read
// transaction, and records the new mark.
func (s *Service) verifyGroup(ctx context.Context, gs *groupState, keys protocol.KeyResolver) int64 {
	id := gs.id
	if !gs.markRead.Load() && !s.readMark(gs) {
		return 0
	}
	end := gs.tail.last.Load() // durable: the writer has committed it
	gs.mu.Lock()
	first := gs.first
	gs.mu.Unlock()
	from := max(gs.verified.Load()+1, first)
	if from > end {
		return 0
	}
	var n int64
	var mark []byte
	sinceMark := uint64(0)
	run := storecheck.Run{GroupID: id, Keys: keys, Next: from}
	for from <= end && ctx.Err() == nil && s.integrity.damage(id) == nil {
		to := min(from+backgroundChunk-1, end)
		var lastRaw []byte
		err := s.integrity.view(id, func(tx logstore.Tx) error {
			gb, err := openGroupBuckets(tx, id, false)
			if err != nil || gb == nil {
				return fmt.Errorf("buckets: %v", err)
			}
			// Compaction removes a prefix: what this transaction holds
			// from its first online event on is whole.
			if f, _ := onlineFrom(gb); f > from {
				from, run.Next = f, f
				to = max(to, f-1)
			}
			c := gb.events.Cursor()
			for k, v := c.Seek(seqKey(from)); k != nil && seqFromKey(k) <= to; k, v = c.Next() {
				run.Add(k, v)
				lastRaw = v
			}
			if run.Next == to+1 && lastRaw != nil {
				lastRaw = encodeMark(to, lastRaw) // v is valid only inside the transaction
			}
			return nil
		})
		if err == nil && run.Next != to+1 {
			run.Fail(to, "events %d..%d are missing", run.Next, to)
		}
		if err == nil {
			err = runErr(&run)
		}
		if err != nil {
			if s.rawGroup(id) == nil {
				return n // purged meanwhile
			}
			if s.integrity.damage(id) == nil {
				s.integrity.mark(id, err)
			}
			break
		}
		n += int64(to - from + 1)
		s.integrity.checked.Add(int64(to - from + 1))
		gs.verified.Store(to)
		mark = lastRaw
		if sinceMark += to - from + 1; sinceMark >= markEvery {
			s.writeMark(id, mark)
			mark, sinceMark = nil, 0
		}
		from = to + 1
	}
	if mark != nil {
		s.writeMark(id, mark)
	}
	return n
}

// readMark sets verified from the stored mark of a Group Open did not
// verify (an archived one); false when the Group cannot be read.
func (s *Service) readMark(gs *groupState) bool {
	err := s.integrity.view(gs.id, func(tx logstore.Tx) error {
		gb, err := openGroupBuckets(tx, gs.id, false)
		if err != nil || gb == nil {
			return fmt.Errorf("buckets: %v", err)
		}
		from, mismatch := markFrom(gb)
		if mismatch {
			s.integrity.mismatched.Add(1)
			s.log.Warn("the Group's verification mark does not match its log; verifying it from its first online event", "group", gs.id, "from", from)
		}
		gs.verified.Store(from - 1)
		return nil
	})
	if err != nil {
		if s.integrity.damage(gs.id) == nil && s.rawGroup(gs.id) != nil { // not purged meanwhile
			s.integrity.mark(gs.id, err)
		}
		return false
	}
	gs.markRead.Store(true)
	return true
}

// writeMark records a Group's verification mark; a failure is logged
// only: the next start verifies again from the older mark.
func (s *Service) writeMark(groupID string, mark []byte) {
	err := <-s.writer.submit(func(tx logstore.Tx) error {
		gb, err := openGroupBuckets(tx, groupID, false)
		if err != nil || gb == nil {
			return err
		}
		return gb.meta.Put(keyVerified, mark)
	})
	if err != nil {
		s.log.Warn("could not record the verification mark", "group", groupID, "err", err)
	}
}

// VerifyStats is what the integrity checks did since Open: events
// verified before serving and in the background, Groups whose mark did not
// match the log, and finished background passes.
type VerifyStats struct {
	AtOpen, Background, Mismatched, Passes int64
}

// VerifyStats reports the integrity checks' counts.
func (s *Service) VerifyStats() VerifyStats {
	return VerifyStats{AtOpen: s.integrity.opened.Load(), Background: s.integrity.checked.Load(),
		Mismatched: s.integrity.mismatched.Load(), Passes: s.integrity.passes.Load()}
}
