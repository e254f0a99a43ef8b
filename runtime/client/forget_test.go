package client

import (
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// A Group the store forgot is not subscribed again when the authority
// lists it (HELLO, GROUPS), nor from the configuration; the tombstones of
// Groups no longer listed are dropped.
func TestForgottenGroupsAreNotSubscribed(t *testing.T) {
	store := openStore(t, t.TempDir())
	t.Cleanup(func() { store.Close() })
	for _, g := range []string{"grp-done", "grp-gone"} {
		if err := store.Forget(g); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(Config{URL: "wss://authority.example/mwp", AgentID: agentID, Key: agentKey, Store: store,
		Groups: []string{"grp-done"}, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c.joined([]string{"grp-done", "grp-live"})
	if got := c.wantedGroups(); !slices.Equal(got, []string{"grp-live"}) {
		t.Fatalf("wanted %v, want only grp-live", got)
	}
	ts, err := store.Tombstones()
	if err != nil || len(ts) != 1 || ts[0].GroupID != "grp-done" {
		t.Fatalf("tombstones %+v, %v: want grp-done's only (grp-gone is no longer listed)", ts, err)
	}
	c.DropGroup("grp-live")
	if err := store.Forget("grp-live"); err != nil {
		t.Fatal(err)
	}
	if got := c.wantedGroups(); len(got) != 0 {
		t.Fatalf("wanted %v after dropping grp-live", got)
	}
	var _ Tombstones = (*queue.Store)(nil)
}

// The stream of a Group the worker forgot runs on until the connection
// ends (the binding has no UNSUBSCRIBE). Once its tombstone is gone too
// (the authority stopped listing it: archived), its next events must
// not read as a new Group with a gap, replayed from 0: that subscribed an
// archived Group again and kept it, rejected (CURSOR_TOO_OLD), for good.
func TestDroppedGroupStreamIsIgnored(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	logA, logB := groupLog(t, "grp-a", 8), groupLog(t, "grp-b", 4)
	fs.setLog("grp-a", logA[:5])
	fs.setLog("grp-b", logB[:2])
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a", "grp-b"}, GapTimeout: time.Nanosecond})
	waitFor(t, r.sig, "caught up", func() bool { return store.Cursor("grp-a") == 5 && store.Cursor("grp-b") == 2 })

	r.c.DropGroup("grp-a")
	if err := store.Forget("grp-a"); err != nil {
		t.Fatal(err)
	}
	if err := store.KeepTombstones([]string{"grp-b"}); err != nil { // no longer listed
		t.Fatal(err)
	}
	fs.appendLive("grp-a", logA[5:8]...)
	// Events of one connection are read in order, so grp-b's two (one
	// loop turn apart) come after grp-a's and after a gap would be due.
	for seq := 3; seq <= 4; seq++ {
		fs.appendLive("grp-b", logB[seq-1])
		waitFor(t, r.sig, "grp-b applied", func() bool { return store.Cursor("grp-b") == uint64(seq) })
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var again []uint64
	for _, gp := range fs.subs[2:] {
		if gp.GroupID == "grp-a" {
			again = append(again, gp.AfterSequence)
		}
	}
	if len(again) != 0 || slices.Contains(store.GroupIDs(), "grp-a") || r.st.count(StateGroupRejected) != 0 {
		t.Fatalf("a dropped Group came back: SUBSCRIBE after %v, stored %v, states %v", again, store.GroupIDs(), r.st.all)
	}
}

// The stream of a Group the worker forgot ends with GROUP_NOT_FOUND once
// the authority purges it. That is no refusal: the Group is not marked
// rejected (which subscribed it again with back-off, and kept it in the
// rejected set for good), while the same ERROR about a Group still
// followed is.
func TestDroppedGroupErrorIsIgnored(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	fs.setLog("grp-a", groupLog(t, "grp-a", 3))
	fs.setLog("grp-b", groupLog(t, "grp-b", 2))
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a", "grp-b"}})
	waitFor(t, r.sig, "caught up", func() bool { return store.Cursor("grp-a") == 3 && store.Cursor("grp-b") == 2 })
	r.c.DropGroup("grp-a")
	if err := store.Forget("grp-a"); err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	var sc *serverConn
	for c := range fs.conns {
		sc = c
	}
	fs.mu.Unlock()
	for _, g := range []string{"grp-a", "grp-b"} { // in order: grp-b's answer comes after grp-a's
		e := protocol.Errorf(protocol.CodeGroupNotFound, "group %s not found", g)
		e.Details = map[string]any{"groupId": g}
		sc.control(protocol.ErrorFrame{Type: protocol.FrameError, FrameID: "s-gone-" + g, Error: e})
	}
	waitFor(t, r.sig, "grp-b rejected", func() bool { return r.st.count(StateGroupRejected) > 0 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	for _, ch := range r.st.all {
		if ch.State == StateGroupRejected && ch.GroupID != "grp-b" {
			t.Fatalf("states %v: the forgotten grp-a was rejected", r.st.all)
		}
	}
}
