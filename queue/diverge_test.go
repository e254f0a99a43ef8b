package queue

import (
	"crypto/ed25519"
	"slices"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// An authority restored from an older copy issues new events under
// sequences the worker already applied. A redelivery (the same signed
// bytes) is a duplicate; another document at an applied sequence is a
// divergence: refused, recorded durably, and the Group applies nothing
// more, also after a restart, until a snapshot of the authority resyncs it.
func TestDivergenceStopsTheGroup(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	c := testContract(1, protocol.UrgencyNormal, false)
	st.authorized("wi-1", c)
	st.offered("wi-1", nil, self)
	dir := t.TempDir()
	s := openTest(t, dir, fast)
	if res := mustApply(t, s, st.evs...); len(res.Applied) != 3 {
		t.Fatalf("setup: %+v", res)
	}

	// The same bytes again: a duplicate, nothing more.
	res := mustApply(t, s, st.evs[1])
	if len(res.Duplicates) != 1 || len(res.Rejected) != 0 || len(res.Diverged) != 0 {
		t.Fatalf("redelivery: %+v", res)
	}

	// The restored authority's own history from sequence 2: new offers.
	other := newStream("g")
	other.missionCreated()
	other.authorized("wi-2", c)
	other.offered("wi-2", nil, self)
	next := other.evs[2]
	res = mustApply(t, s, other.evs[1], next)
	if len(res.Diverged) != 1 || len(res.Applied) != 0 || len(res.Rejected) != 2 {
		t.Fatalf("contradiction at an applied sequence: %+v", res)
	}
	d := res.Diverged[0]
	if d.Sequence != 2 || d.StoredEventID != st.evs[1].Event.EventID || d.ReceivedEventID != other.evs[1].Event.EventID ||
		protocol.CodeOf(res.Rejected[0].Err) != protocol.CodeProtocolViolation {
		t.Fatalf("divergence %+v, rejected %+v", d, res.Rejected)
	}
	if _, ok := s.Item("g", "wi-2"); ok {
		t.Fatal("an event of the diverged history reached the view")
	}

	// Later events, even in order, are refused and not stored.
	st.accepted("wi-1", self, 1, 1)
	res = mustApply(t, s, st.evs[3])
	if len(res.Applied) != 0 || len(res.Rejected) != 1 || s.Cursor("g") != 3 {
		t.Fatalf("after the divergence: %+v, cursor %d", res, s.Cursor("g"))
	}

	// It survives a restart, and inspect's report shows it.
	closeChecked(t, s)
	s = openTest(t, dir, fast)
	if got, ok := s.Divergence("g"); !ok || got != d {
		t.Fatalf("after reopen: %+v %v, want %+v", got, ok, d)
	}
	if res := mustApply(t, s, st.evs[3]); len(res.Rejected) != 1 {
		t.Fatalf("after reopen the Group still applies: %+v", res)
	}

	// Resync: a snapshot of the authority, behind the cursor, is restored.
	snap := snapshotFixture(1)
	doc, ref := signedSnapshot(t, snap)
	if _, err := s.RestoreSnapshot(ref, doc, verifyWith(authorityKey.Public().(ed25519.PublicKey))); err != nil {
		t.Fatalf("resync: %v", err)
	}
	if _, ok := s.Divergence("g"); ok || s.Cursor("g") != 1 {
		t.Fatalf("after the resync: diverged %v, cursor %d", ok, s.Cursor("g"))
	}
}

// The operator's resync without a snapshot: ResetGroup forgets the Group's
// diverged history, durably, and the authority's history then applies
// from sequence 1; other Groups are untouched.
func TestResetGroupReplaysTheAuthoritysHistory(t *testing.T) {
	st := newStream("g")
	st.missionCreated()
	c := testContract(1, protocol.UrgencyNormal, false)
	st.authorized("wi-1", c)
	keep := newStream("h")
	keep.missionCreated()
	keep.authorized("wi-9", c)
	dir := t.TempDir()
	s := openTest(t, dir, fast)
	mustApply(t, s, append(st.evs, keep.evs...)...)
	other := newStream("g")
	other.missionCreated()
	other.authorized("wi-2", c)
	if res := mustApply(t, s, other.evs[1]); len(res.Diverged) != 1 {
		t.Fatalf("setup: no divergence: %+v", res)
	}

	had, err := s.ResetGroup("g")
	if err != nil || had != 2 {
		t.Fatalf("reset: cursor %d, %v", had, err)
	}
	if _, ok := s.Divergence("g"); ok || s.Cursor("g") != 0 || len(s.Items("g")) != 0 {
		t.Fatalf("after the reset: cursor %d, items %d", s.Cursor("g"), len(s.Items("g")))
	}
	closeChecked(t, s)
	s = openTest(t, dir, fast)
	if _, ok := s.Divergence("g"); ok || s.Cursor("g") != 0 {
		t.Fatalf("after reopen: the reset did not last (cursor %d)", s.Cursor("g"))
	}
	if !slices.Contains(s.GroupIDs(), "g") {
		t.Fatal("the reset Group is no longer listed: it would not be subscribed again")
	}
	if res := mustApply(t, s, other.evs...); len(res.Applied) != 2 {
		t.Fatalf("the authority's history after the reset: %+v", res)
	}
	if _, ok := s.Item("g", "wi-2"); !ok {
		t.Fatal("wi-2 of the authority's history is not in the view")
	}
	if _, ok := s.Item("g", "wi-1"); ok {
		t.Fatal("wi-1 of the forgotten history is still in the view")
	}
	if _, ok := s.Item("h", "wi-9"); !ok || s.Cursor("h") != 2 {
		t.Fatal("another Group was touched")
	}
	if _, err := s.ResetGroup("nope"); err == nil {
		t.Fatal("reset of an unknown Group succeeded")
	}
}
