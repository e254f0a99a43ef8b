package queue

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/missionweave/mwp-worker/protocol"
)

// pruning prunes as soon and as often as the bounds allow.
var pruning = Options{NoSync: true, NoSocket: true, PruneTail: MinTailEvents, PruneEvery: 1}

// inboxFrom renders a Group's inbox events after base, as dumpInbox.
func inboxFrom(t tb, db *bolt.DB, group string, base uint64) string {
	t.Helper()
	var b bytes.Buffer
	err := db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktGroups).Bucket([]byte(group)).Bucket(bktInbox).Cursor()
		for k, v := c.Seek(u64(base + 1)); k != nil; k, v = c.Next() {
			fmt.Fprintf(&b, "%d %s\n", getU64(k), v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func baseOf(s *Store, group string) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.groups[group].base
}

func inboxKeys(t tb, db *bolt.DB, group string) int {
	t.Helper()
	n := 0
	if err := db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bktGroups).Bucket([]byte(group)).Bucket(bktInbox).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// samePruned fails unless s, which prunes, holds the projection full
// replay (ref, which does not) holds, and the same events after its base.
func samePruned(t tb, s, ref *Store, group string) {
	t.Helper()
	base := baseOf(s, group)
	got := dumpProjection(t, s.db, group) + inboxFrom(t, s.db, group, base)
	want := dumpProjection(t, ref.db, group) + inboxFrom(t, ref.db, group, base)
	if got != want {
		t.Fatal(fmt.Sprintf("%s pruned through %d differs from full replay:\n%s\nwant\n%s", group, base, got, want))
	}
	if !reflect.DeepEqual(s.Items(group), ref.Items(group)) {
		t.Fatal(group + ": in-memory view differs from full replay")
	}
	if m1, _ := s.Mission(group); !reflect.DeepEqual(m1, func() MissionView { m, _ := ref.Mission(group); return m }()) {
		t.Fatal(group + ": mission view differs from full replay")
	}
}

// Pruning the inbox and rebuilding from the pruned base gives the
// projection full replay gives, after any delivery order, restarts and
// prune bounds; the inbox keeps at least the tail.
func TestPropertyPruneRebuildEqualsFullReplay(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		st := randomStream("g", rapid.IntRange(1, 30).Draw(rt, "items"), rand.New(rand.NewPCG(seed, seed>>1)))
		if rapid.Bool().Draw(rt, "closed") {
			st.missionClosed(protocol.EvtMissionCancelled, protocol.MissionCancelled)
		}
		opts := Options{NoSync: true, NoSocket: true,
			PruneTail:  rapid.IntRange(0, 24).Draw(rt, "tail"),
			PruneEvery: rapid.IntRange(1, 8).Draw(rt, "every"),
		}
		dir := t.TempDir()
		s, err := Open(dir, opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { s.Close() }()
		for c := uint64(0); c < uint64(len(st.evs)); c = s.Cursor("g") {
			lo, hi := int(c)-min(int(c), 3), min(len(st.evs), int(c)+1+rapid.IntRange(0, 6).Draw(rt, "ahead"))
			window := rapid.Permutation(append([]Incoming(nil), st.evs[lo:hi]...)).Draw(rt, "order")
			mustApply(rt, s, window...)
			if rapid.IntRange(0, 7).Draw(rt, "restart") == 0 {
				s.Close()
				if s, err = Open(dir, opts); err != nil {
					rt.Fatal(err)
				}
			}
		}
		ref, err := Open(t.TempDir(), Options{NoSync: true, NoSocket: true, NoPrune: true})
		if err != nil {
			rt.Fatal(err)
		}
		defer ref.Close()
		mustApply(rt, ref, st.evs...)

		tail, _ := opts.pruneBounds()
		if n, cursor := inboxKeys(rt, s.db, "g"), s.Cursor("g"); uint64(n) < min(tail, cursor) {
			rt.Fatalf("inbox keeps %d events at cursor %d, want at least the tail %d", n, cursor, tail)
		}
		samePruned(rt, s, ref, "g")
		if err := s.Rebuild(); err != nil {
			rt.Fatal(err)
		}
		samePruned(rt, s, ref, "g")
		s.Close()
		if s, err = Open(dir, opts); err != nil {
			rt.Fatal(err)
		}
		samePruned(rt, s, ref, "g")
	})
}

// The inbox stays bounded however long the Group runs: its keys do not
// grow with the events applied once every WorkItem is finished.
func TestPruneBoundsInbox(t *testing.T) {
	const tail, every = MinTailEvents, 8
	opts := Options{NoSync: true, NoSocket: true, PruneTail: tail, PruneEvery: every}
	keysAfter := func(items int) (int, uint64) {
		st := newStream("g")
		st.missionCreated()
		for i := range items {
			wi := fmt.Sprintf("wi-%d", i)
			st.authorized(wi, testContract(1, "normal", false))
			st.offered(wi, nil, self)
			st.accepted(wi, self, 1, 1)
			st.started(wi, self, 1, "lease-"+wi)
			st.submitted(wi)
			st.resultAccepted(wi)
		}
		s := openTest(t, t.TempDir(), opts)
		for _, in := range st.evs {
			mustApply(t, s, in)
		}
		return inboxKeys(t, s.db, "g"), baseOf(s, "g")
	}
	small, base := keysAfter(20)
	large, _ := keysAfter(200)
	if base == 0 {
		t.Fatalf("20 finished items: nothing pruned")
	}
	if large > tail+every || small > tail+every {
		t.Fatalf("inbox keys: %d after 20 items, %d after 200; want at most tail+every = %d", small, large, tail+every)
	}
}

// Live work holds its events: a WorkItem still queued keeps the event that
// carried its contract, however many later events the Group applies, so
// Store.Contract answers; once it is finished, the inbox is pruned past it.
func TestPruneKeepsLiveContract(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	st.authorized("wi-live", testContract(1, "high", false))
	live := st.seq
	for range 60 {
		st.message("m")
	}
	s := openTest(t, t.TempDir(), pruning)
	for _, in := range st.evs {
		mustApply(t, s, in)
	}
	if b := baseOf(s, "g"); b >= live {
		t.Fatalf("base %d passed the live item's contract event %d", b, live)
	}
	if b := baseOf(s, "g"); b != live-1 {
		t.Fatalf("base %d, want %d: everything before the live item's contract event is prunable", b, live-1)
	}
	if c, err := s.Contract("g", "wi-live"); err != nil || c.Revision != 1 {
		t.Fatalf("contract of the live item = %+v, %v", c, err)
	}
	st.cancelled("wi-live")
	for range 4 {
		st.message("m")
	}
	for _, in := range st.evs[s.Cursor("g"):] {
		mustApply(t, s, in)
	}
	if b, want := baseOf(s, "g"), s.Cursor("g")-MinTailEvents; b != want {
		t.Fatalf("base %d after the item was cancelled, want cursor-tail %d", b, want)
	}
	ref := openTest(t, t.TempDir(), Options{NoSync: true, NoSocket: true, NoPrune: true})
	mustApply(t, ref, st.evs...)
	samePruned(t, s, ref, "g")
}

// A commit that fails after pruning (a crash before it commits) leaves
// nothing pruned: base, inbox and projection are the previous commit's,
// on disk and in memory, and the next commit prunes normally.
func TestPruneRollsBackWithItsCommit(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	for range 40 {
		st.message("m")
	}
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSync: true, NoSocket: true, PruneTail: MinTailEvents, PruneEvery: 20})
	mustApply(t, s, st.evs[:30]...)
	before, base := dumpProjection(t, s.db, "g")+dumpInbox(t, s.db, "g"), baseOf(s, "g")
	if base != 0 {
		t.Fatalf("pruned at cursor 30 with tail 16 and every 20")
	}
	boom := errors.New("crash")
	s.failApply = func() error { return boom }
	if _, err := s.Apply(st.evs[30:]); !errors.Is(err, boom) {
		t.Fatalf("apply = %v, want the injected failure", err)
	}
	if got := dumpProjection(t, s.db, "g") + dumpInbox(t, s.db, "g"); got != before || baseOf(s, "g") != 0 {
		t.Fatalf("a failed commit pruned: base %d\n%s", baseOf(s, "g"), got)
	}
	s.failApply = nil
	mustApply(t, s, st.evs[30:]...)
	if b := baseOf(s, "g"); b != uint64(len(st.evs))-MinTailEvents {
		t.Fatalf("base %d after the retried commit, want %d", b, uint64(len(st.evs))-MinTailEvents)
	}
	closeChecked(t, s)
	s2 := openTest(t, dir, Options{NoSync: true, NoSocket: true})
	if b := baseOf(s2, "g"); b != uint64(len(st.evs))-MinTailEvents {
		t.Fatalf("base %d after reopen", b)
	}
}

// A pruned base written by a build that projects differently cannot be
// re-projected (its events are gone): Open empties that Group, to be read
// again from the authority, and keeps the others.
func TestPruneOtherProjectionResetsGroup(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	for range 40 {
		st.message("m")
	}
	other := newStream("h")
	other.missionCreated()
	dir := t.TempDir()
	s, err := Open(dir, pruning)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, st.evs...)
	mustApply(t, s, other.evs...)
	if baseOf(s, "g") == 0 {
		t.Fatal("nothing pruned")
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bktGroups).Bucket([]byte("g")).Bucket(bktPruned).Put(keyProjection, u64(ProjectionVersion-1)); err != nil {
			return err
		}
		return tx.Bucket(bktMeta).Put(keyProjection, u64(ProjectionVersion-1))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, pruning)
	if c := s.Cursor("g"); c != 0 {
		t.Fatalf("group g cursor %d after an upgrade over another build's pruned base, want 0 (read again)", c)
	}
	if c := s.Cursor("h"); c != uint64(len(other.evs)) {
		t.Fatalf("group h cursor %d, want %d (not pruned: kept)", c, len(other.evs))
	}
	mustApply(t, s, st.evs...)
	ref := openTest(t, t.TempDir(), Options{NoSync: true, NoSocket: true, NoPrune: true})
	mustApply(t, ref, st.evs...)
	samePruned(t, s, ref, "g")
}
