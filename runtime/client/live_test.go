package client

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// TestPingTimeoutReconnects steps a manual clock: a PING goes out after the
// interval; with no echo within the timeout the client reconnects.
func TestPingTimeoutReconnects(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	fs.echoPings = false
	clk := clock.NewFake(t0)
	fs.now = clk.Now
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Clock: clk, PingInterval: 10 * time.Second, PingTimeout: 5 * time.Second,
		Rand: func() float64 { return 0 }}) // reconnect without a backoff timer
	r.connected(t)
	clk.Advance(9 * time.Second)
	clk.Advance(time.Second)
	waitFor(t, r.sig, "PING at the server", func() bool { _, _, _, p := fs.snapshot(); return p == 1 })
	if h, _, _, _ := fs.snapshot(); h != 1 {
		t.Fatalf("%d HELLOs before the timeout", h)
	}
	clk.Advance(5 * time.Second)
	waitFor(t, r.sig, "reconnect", func() bool { h, _, _, _ := fs.snapshot(); return h == 2 })
	if ch, ok := r.st.last(StateDisconnected); !ok || !errors.Is(ch.Err, errPingTimeout) {
		t.Fatalf("disconnect = %+v, want the ping timeout", ch)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestPingEchoesKeepConnection: answered PINGs never cause a reconnect.
func TestPingEchoesKeepConnection(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	store := openStore(t, t.TempDir())
	defer store.Close()
	pr := &protocol.PresenceRecord{AgentID: agentID, SessionEpoch: 1, CapacityState: protocol.CapacityConstrained,
		MaxConcurrency: 4, ActiveSlots: 3, ObservedAt: protocol.NewTime(t0)}
	r := startClient(t, fs, Config{Store: store, PingInterval: 5 * time.Millisecond, PingTimeout: 5 * time.Second,
		Presence: func() *protocol.PresenceRecord { return pr }})
	waitFor(t, r.sig, "several PINGs", func() bool { _, _, _, p := fs.snapshot(); return p >= 5 })
	if h, _, _, _ := fs.snapshot(); h != 1 {
		t.Fatalf("%d HELLOs: echoed PINGs must keep the connection", h)
	}
	fs.mu.Lock()
	got := fs.presence
	fs.mu.Unlock()
	if got == nil || *got != *pr {
		t.Fatalf("PING presence = %+v, want %+v", got, pr)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestServerPingIsEchoed(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store})
	r.connected(t)
	fs.mu.Lock()
	for sc := range fs.conns {
		sc.control(protocol.Ping{Type: protocol.FramePing, FrameID: "s-p1", Nonce: "nonce-from-the-server-1"})
	}
	fs.mu.Unlock()
	waitFor(t, r.sig, "echo", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return slices.Equal(fs.echoes, []string{"nonce-from-the-server-1"})
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// snapshotOf returns a Group Snapshot of group at seq signed by key, and
// its reference.
func snapshotOf(t testing.TB, group string, seq uint64, key protocol.PrivateKey) ([]byte, protocol.SnapshotRef) {
	t.Helper()
	at := protocol.NewTime(t0.Add(time.Hour))
	snap := protocol.GroupSnapshot{
		SnapshotID: "snap-" + group, GroupID: group, Sequence: seq, LastEventID: "evt-x", CreatedAt: at, CreatedBy: "authority-1",
		Mission: protocol.Mission{MissionID: "mis-" + group, GroupID: group, Title: "t", Objective: "o", State: protocol.MissionActive,
			Owner: protocol.Actor{Kind: protocol.ActorHuman, ID: "human-1"}, PriorityClass: protocol.PriorityHigh, CreatedAt: at, Revision: 4},
		Memberships: protocol.List[protocol.Membership]{}, WorkItems: protocol.List[protocol.WorkItem]{},
		Approvals: protocol.List[protocol.Approval]{}, Artifacts: protocol.List[string]{},
		PolicyLogDigest: protocol.Digest([]byte("policy")),
		Signature:       protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: key.KeyID, CreatedAt: at},
	}
	doc, err := protocol.SignedValue(snap, key)
	if err != nil {
		t.Fatal(err)
	}
	return doc, protocol.SnapshotRef{SnapshotID: snap.SnapshotID, GroupID: group, Sequence: seq, Digest: protocol.Digest(doc), URI: "https://authority.test/snapshots/" + snap.SnapshotID}
}

// TestCursorTooOldRestoresSnapshot: the authority no longer has the events
// after our cursor online; the client fetches and checks the snapshot (a
// bad one is refused and fetched again), restores it and replays after it.
func TestCursorTooOldRestoresSnapshot(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	log := groupLog(t, "grp-a", 30)
	fs.setLog("grp-a", log)
	good, ref := snapshotOf(t, "grp-a", 20, authorityKey)
	forged, _ := snapshotOf(t, "grp-a", 20, otherKey)
	fs.tooOld["grp-a"] = ref
	var fetches atomic.Int32
	fetch := func(ctx context.Context, got protocol.SnapshotRef) ([]byte, error) {
		if got != ref {
			t.Errorf("fetch of %+v, want %+v", got, ref)
		}
		if fetches.Add(1) == 1 {
			return forged, nil
		}
		return good, nil
	}
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a"}, FetchSnapshot: fetch})
	waitFor(t, r.sig, "replay after the snapshot", func() bool { return store.Cursor("grp-a") == 30 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want the forged one refused and one more", n)
	}
	fs.mu.Lock()
	subs := slices.Clone(fs.subs)
	fs.mu.Unlock()
	if last := subs[len(subs)-1]; last.AfterSequence != 20 {
		t.Fatalf("last SUBSCRIBE %+v, want afterSequence 20 (the snapshot)", last)
	}
	if m, _ := store.Mission("grp-a"); m.Revision != 4 || m.MissionID != "mis-grp-a" {
		t.Fatalf("mission view %+v does not come from the snapshot", m)
	}
	for seq := uint64(21); seq <= 30; seq++ {
		if _, err := store.Event("grp-a", seq); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCursorTooOldWithoutFetcherRejectsGroup(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	_, ref := snapshotOf(t, "grp-a", 20, authorityKey)
	fs.tooOld["grp-a"] = ref
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a"}})
	waitFor(t, r.sig, "rejection", func() bool { return r.st.count(StateGroupRejected) == 1 })
	if ch, _ := r.st.last(StateGroupRejected); ch.GroupID != "grp-a" || protocol.CodeOf(ch.Err) != protocol.CodeCursorTooOld {
		t.Fatalf("rejection %+v", ch)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
