package client

import (
	"slices"
	"testing"

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
