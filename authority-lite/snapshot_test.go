package authoritylite

import (
	"context"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// TestCompactAndCursorTooOld runs the whole CURSOR_TOO_OLD path against a
// real worker store: compaction, the error with the snapshot reference,
// restore with hash and signature checks, then replay from the snapshot.
func TestCompactAndCursorTooOld(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	for _, id := range []string{"m1", "m2", "m3"} {
		k.ok(k.alice, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: id, ConversationID: "c", Text: "x"})
	}
	last := k.s.LastSequence("grp-a")
	ref, err := k.s.Compact("grp-a", 2)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Sequence != last {
		t.Fatalf("snapshot at %d, want %d", ref.Sequence, last)
	}
	_, err = k.s.Events("grp-a", 0, 10)
	pe, ok := err.(*protocol.Error)
	if !ok || pe.Code != protocol.CodeCursorTooOld || pe.Details["snapshot"] == nil {
		t.Fatalf("reading from 0 after compaction: %v", err)
	}
	// Still online: the retained tail and the snapshot event.
	tail, err := k.s.Events("grp-a", last-2, 0)
	if err != nil || len(tail) != 3 || tail[2].Type != protocol.EvtGroupSnapshotCreated {
		t.Fatalf("tail: %v %d", err, len(tail))
	}

	doc, err := k.s.Snapshot(ref)
	if err != nil {
		t.Fatal(err)
	}
	store, err := queue.Open(t.TempDir(), queue.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	keys := protocol.NewKeySet(k.s.PublicKey())
	verify := func(m map[string]any) error { return protocol.Verify(m, keys) }
	if _, err := store.RestoreSnapshot(ref, doc, verify); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := store.Cursor("grp-a"); got != ref.Sequence {
		t.Fatalf("cursor after restore %d, want %d", got, ref.Sequence)
	}
	if e, ok := store.Item("grp-a", "wi-1"); !ok || e.State != protocol.WorkActive {
		t.Fatalf("restored item: %+v %v", e, ok)
	}
	rest, err := k.s.Events("grp-a", ref.Sequence, 0)
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]queue.Incoming, 0, len(rest))
	for _, se := range rest {
		in, err := queue.Decode(se.Raw)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, in)
	}
	if _, err := store.Apply(batch); err != nil {
		t.Fatal(err)
	}
	if got := store.Cursor("grp-a"); got != k.s.LastSequence("grp-a") {
		t.Fatalf("cursor %d, want %d", got, k.s.LastSequence("grp-a"))
	}
	// A tampered snapshot is refused by the worker.
	bad := append([]byte(nil), doc...)
	bad[len(bad)/2] ^= 1
	store2, _ := queue.Open(t.TempDir(), queue.Options{NoSync: true})
	defer store2.Close()
	if _, err := store2.RestoreSnapshot(ref, bad, verify); err == nil {
		t.Fatal("tampered snapshot restored")
	}
	// Reopen keeps the online window.
	k.s.Close()
	k.s = openSvc(t, k.dir, k.clk, k.akey)
	if _, err := k.s.Events("grp-a", 0, 1); protocol.CodeOf(err) != protocol.CodeCursorTooOld {
		t.Fatalf("after reopen: %v", err)
	}
}

// TestCompactNeverLowersFirst: a compaction keeping more than an earlier
// one left online keeps the online log as it is; it does not claim events
// already gone (the background verification would call the Group damaged).
func TestCompactNeverLowersFirst(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	if _, err := k.s.Compact("grp-a", 0); err != nil {
		t.Fatal(err)
	}
	first := k.s.peekGroup("grp-a").first
	if _, err := k.s.Compact("grp-a", 4); err != nil {
		t.Fatal(err)
	}
	if got := k.s.peekGroup("grp-a").first; got != first {
		t.Fatalf("first online event %d after the second compaction, want %d", got, first)
	}
	if n := k.s.verifyPass(context.Background()); n == 0 || k.s.integrity.damage("grp-a") != nil {
		t.Fatalf("verified %d events, damage %v", n, k.s.integrity.damage("grp-a"))
	}
}
