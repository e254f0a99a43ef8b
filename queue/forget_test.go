package queue

import (
	"errors"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// finishedStream is a Group whose Mission ran n WorkItems to verified and
// was approved.
func finishedStream(group string, n int) *stream {
	st := newStream(group)
	st.missionCreated()
	st.member(protocol.EvtMembershipChanged, self, 1, protocol.MembershipActive)
	for i := range n {
		wi := fmt.Sprintf("wi-%d", i)
		st.authorized(wi, testContract(1, "normal", false))
		st.offered(wi, nil, self)
		st.accepted(wi, self, 1, 1)
		st.started(wi, self, 1, "lease-"+wi)
		st.submitted(wi)
		st.resultAccepted(wi)
	}
	st.missionClosed(protocol.EvtMissionApproved, protocol.MissionApproved)
	return st
}

// storedKeys counts every key of the file, in every bucket.
func storedKeys(t *testing.T, db *bolt.DB) int {
	t.Helper()
	n := 0
	var walk func(b *bolt.Bucket)
	walk = func(b *bolt.Bucket) {
		_ = b.ForEach(func(k, v []byte) error {
			if v == nil {
				walk(b.Bucket(k))
			} else {
				n++
			}
			return nil
		})
	}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { walk(b); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// N finished Groups forgotten leave nothing that grows with N once the
// authority stops listing them; while listed, one tombstone each.
func TestForgetFinishedGroupsKeysDoNotGrow(t *testing.T) {
	keysAfter := func(n int) (listed, dropped int) {
		s := openTest(t, t.TempDir(), fast)
		live := finishedStream("grp-live", 1)
		mustApply(t, s, live.evs...)
		var ids []string
		for i := range n {
			g := fmt.Sprintf("grp-%03d", i)
			ids = append(ids, g)
			mustApply(t, s, finishedStream(g, 3).evs...)
		}
		for _, g := range ids {
			if err := s.Forget(g); err != nil {
				t.Fatal(err)
			}
		}
		listed = storedKeys(t, s.db)
		if err := s.KeepTombstones([]string{"grp-live"}); err != nil {
			t.Fatal(err)
		}
		return listed, storedKeys(t, s.db)
	}
	l5, d5 := keysAfter(5)
	l50, d50 := keysAfter(50)
	if d5 != d50 {
		t.Fatalf("keys after forgetting 5 Groups: %d, after 50: %d; want no growth", d5, d50)
	}
	if l50-l5 != 45 {
		t.Fatalf("tombstones: %d keys for 5 Groups, %d for 50; want one key a Group", l5, l50)
	}
}

// A forgotten Group's events are refused without storing anything, also
// after a restart; its cursor is gone; a Command of the Group in the
// outbox holds it.
func TestForgetRefusesEventsAndHeldGroups(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, fast)
	st := finishedStream("grp-a", 2)
	mustApply(t, s, st.evs[:len(st.evs)-1]...)
	if err := s.PutOutbox("act-1", command("act-1", "work.start")); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget("grp-a"); !errors.Is(err, ErrGroupHeld) {
		t.Fatalf("forget with a command in the outbox = %v, want ErrGroupHeld", err)
	}
	if err := s.AckOutbox("act-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget("grp-a"); err != nil {
		t.Fatal(err)
	}
	closeChecked(t, s)
	s = openTest(t, dir, fast)
	if !s.Forgotten("grp-a") || len(s.Cursors()) != 0 {
		t.Fatalf("after reopen: forgotten %v, cursors %v", s.Forgotten("grp-a"), s.Cursors())
	}
	res := mustApply(t, s, st.evs...)
	if len(res.Applied) != 0 || len(res.Duplicates) != len(st.evs) || len(s.GroupIDs()) != 0 {
		t.Fatalf("events of a forgotten Group: %+v, groups %v", res, s.GroupIDs())
	}
	ts, err := s.Tombstones()
	if err != nil || len(ts) != 1 || ts[0].MissionID != "mis-grp-a" || ts[0].Cursor != uint64(len(st.evs)-1) {
		t.Fatalf("tombstones %+v, %v", ts, err)
	}
}
