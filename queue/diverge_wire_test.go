package queue

import (
	"crypto/ed25519"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

// history builds a Group's log of n events: the Mission, one WorkItem, then
// messages. Two histories with the same branch are the same bytes; from
// sequence from on, a history of another branch holds other documents
// (what an authority restored from a copy at from-1 issues anew).
func history(n int, branch string, from uint64) []Incoming {
	st := newStream("g")
	st.missionCreated()
	st.authorized("wi-1", testContract(1, protocol.UrgencyNormal, false))
	for st.seq < uint64(n) {
		text := "a"
		if st.seq+1 >= from {
			text = branch
		}
		st.message(fmt.Sprintf("%s-%d", text, st.seq+1))
	}
	return st.evs
}

// ReplayAfter asks the authority for the newest OverlapEvents applied
// events again, never for what the inbox does not hold (a Group restored
// from a snapshot has nothing below its base to compare).
func TestReplayAfterOverlapsTheNewestStoredEvents(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, s *Store)
		want  uint64
	}{
		{"unknown group", func(*testing.T, *Store) {}, 0},
		{"fewer events than the overlap", func(t *testing.T, s *Store) { mustApply(t, s, history(2, "a", 0)...) }, 0},
		{"a long log", func(t *testing.T, s *Store) { mustApply(t, s, history(10, "a", 0)...) }, 10 - OverlapEvents},
		{"restored from a snapshot, nothing after it", func(t *testing.T, s *Store) { restoreAt(t, s, 5) }, 5},
		{"restored from a snapshot, two events after it", func(t *testing.T, s *Store) {
			restoreAt(t, s, 5)
			st := newStream("g")
			st.seq = 5
			st.message("six")
			st.message("seven")
			if res := mustApply(t, s, st.evs...); len(res.Applied) != 2 {
				t.Fatalf("after the snapshot: %+v", res)
			}
		}, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openTest(t, t.TempDir(), fast)
			c.setup(t, s)
			if got := s.ReplayAfter("g"); got != c.want {
				t.Fatalf("ReplayAfter = %d, want %d (cursor %d)", got, c.want, s.Cursor("g"))
			}
		})
	}
}

func restoreAt(t *testing.T, s *Store, seq uint64) {
	t.Helper()
	doc, ref := signedSnapshot(t, snapshotFixture(seq))
	if _, err := s.RestoreSnapshot(ref, doc, verifyWith(authorityKey.Public().(ed25519.PublicKey))); err != nil {
		t.Fatal(err)
	}
}

// What a subscription from ReplayAfter brings back: the authority's events
// from there on, compared with the stored ones. The same history is only
// duplicates (and what is new applies); another history stops the Group at
// the first contradicted sequence, before anything past the cursor applies.
func TestOverlapReplayComparesAppliedEvents(t *testing.T) {
	cases := []struct {
		name         string
		authority    []Incoming // the authority's log now
		wantDiverged uint64     // 0: none
		wantCursor   uint64
	}{
		{"the same log", history(10, "a", 0), 0, 10},
		{"the same log, grown", history(13, "a", 0), 0, 13},
		{"restored at 7, grown past the cursor", history(13, "b", 8), 8, 10},
		{"restored at 8, not yet at the cursor", history(9, "b", 9), 9, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openTest(t, t.TempDir(), fast)
			mustApply(t, s, history(10, "a", 0)...)
			after := s.ReplayAfter("g")
			res := mustApply(t, s, c.authority[after:]...)
			if c.wantDiverged == 0 {
				if len(res.Diverged) != 0 || len(res.Rejected) != 0 || len(res.Duplicates) != int(10-after) {
					t.Fatalf("same history: %+v", res)
				}
			} else {
				if len(res.Diverged) != 1 || res.Diverged[0].Sequence != c.wantDiverged || len(res.Applied) != 0 {
					t.Fatalf("other history: want a divergence at %d: %+v", c.wantDiverged, res)
				}
				if d, ok := s.Divergence("g"); !ok || d.AuthorityLastSequence != nil {
					t.Fatalf("recorded divergence %+v %v", d, ok)
				}
			}
			if got := s.Cursor("g"); got != c.wantCursor {
				t.Fatalf("cursor %d, want %d", got, c.wantCursor)
			}
		})
	}
}

// An authority whose log ends before the cursor says so on the wire; the
// store records it as a divergence at the sequence after the authority's
// last, durably, and applies nothing more of the Group. A log that ends at
// or after the cursor is no divergence.
func TestMarkAhead(t *testing.T) {
	cases := []struct {
		name string
		last uint64
		want bool
	}{
		{"the authority's log ends at the cursor", 10, false},
		{"the authority's log is longer", 12, false},
		{"the authority's log ends before the cursor", 7, true},
		{"the authority's log is empty", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, fast)
			evs := history(13, "a", 0)
			mustApply(t, s, evs[:10]...)
			mustApply(t, s, evs[11]) // held beyond a gap
			d, marked, err := s.MarkAhead("g", c.last)
			if err != nil || marked != c.want {
				t.Fatalf("MarkAhead(%d) = %+v, %v, %v; want marked %v", c.last, d, marked, err, c.want)
			}
			if !c.want {
				if _, ok := s.Divergence("g"); ok {
					t.Fatal("a divergence was recorded")
				}
				if res := mustApply(t, s, evs[10]); len(res.Applied) != 2 || s.Cursor("g") != 12 {
					t.Fatalf("the Group stopped applying: %+v", res)
				}
				return
			}
			if d.Sequence != c.last+1 || d.AuthorityLastSequence == nil || *d.AuthorityLastSequence != c.last ||
				d.StoredEventID != evs[c.last].Event.EventID || d.ReceivedEventID != "" {
				t.Fatalf("divergence %+v", d)
			}
			if len(s.Buffers()) != 0 {
				t.Fatalf("events held beyond a gap survive the divergence: %+v", s.Buffers())
			}
			if res := mustApply(t, s, evs[10]); len(res.Applied) != 0 || len(res.Rejected) != 1 || s.Cursor("g") != 10 {
				t.Fatalf("after the divergence: %+v, cursor %d", res, s.Cursor("g"))
			}
			if again, marked, err := s.MarkAhead("g", 2); err != nil || marked || !reflect.DeepEqual(again, d) {
				t.Fatalf("a second report replaced the first: %+v %v %v", again, marked, err)
			}
			closeChecked(t, s)
			// `mwp-worker check` names the Group: a problem, not ok.
			rep, err := Check(dir, nil, time.Second)
			if err != nil || rep.OK || len(rep.Groups) != 1 || !strings.Contains(rep.Groups[0].Diverged, fmt.Sprintf("at sequence %d", d.Sequence)) ||
				!slices.ContainsFunc(rep.Problems, func(p storecheck.Problem) bool {
					return p.Where == "group" && p.GroupID == "g" && strings.Contains(p.What, "diverged")
				}) {
				t.Fatalf("check of a diverged store: %v %+v", err, rep)
			}
			s = openTest(t, dir, fast)
			if got, ok := s.Divergence("g"); !ok || !reflect.DeepEqual(got, d) {
				t.Fatalf("after reopen: %+v %v, want %+v", got, ok, d)
			}
			if _, err := s.ResetGroup("g"); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.Divergence("g"); ok {
				t.Fatal("resync left the divergence")
			}
		})
	}
	s := openTest(t, t.TempDir(), fast)
	if _, _, err := s.MarkAhead("nope", 1); err == nil {
		t.Fatal("MarkAhead of an unknown Group succeeded")
	}
}
