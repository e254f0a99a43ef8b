package wss

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// plainBackend hides the fake's OnChange: streams then wait on
// Backend.Changed channels.
type plainBackend struct{ Backend }

// subscribeAll subscribes c to groups from sequence 0.
func subscribeAll(c *client, groups []string) {
	var b strings.Builder
	for i, g := range groups {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"groupId":%q,"afterSequence":0}`, g)
	}
	c.send(`{"type":"SUBSCRIBE","frameId":"s1","groups":[` + b.String() + `]}`)
}

// readEvents reads n EVENT frames and returns the highest sequence seen
// per Group.
func readEvents(t *testing.T, c *client, n int) map[string]uint64 {
	t.Helper()
	got := map[string]uint64{}
	for range n {
		g, seq, ok := eventSeq(c.read())
		if !ok {
			t.Fatal("want an EVENT frame")
		}
		if seq != got[g]+1 {
			t.Fatalf("%s: event %d after %d", g, seq, got[g])
		}
		got[g] = seq
	}
	return got
}

// A connection's goroutines do not grow with the Groups it streams: once
// every stream has caught up, 60 idle subscriptions cost no goroutine
// (each is a callback registered with the Backend), and a Group that gets
// new events later is still delivered.
func TestServeIdleGroupsCostNoGoroutine(t *testing.T) {
	const n = 60
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	var groups []string
	for i := range n {
		g := fmt.Sprintf("grp-%02d", i)
		groups = append(groups, g)
		fb.addGroup(g, "w1")
		fb.appendEvents(t, g, 2, protocol.EvtMessagePosted, "")
	}
	url, _ := startServer(t, fb, Options{}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	c.send(`{"type":"PING","frameId":"p0","nonce":"` + testNonce + `"}`)
	c.read() // the echo: the connection is set up
	before := runtime.NumGoroutine()
	subscribeAll(c, groups)
	if got := readEvents(t, c, 2*n); len(got) != n {
		t.Fatalf("events of %d Groups, want %d", len(got), n)
	}
	until(t, "the idle streams to hold no goroutine", func() bool { return runtime.NumGoroutine() <= before+2 })
	fb.appendEvents(t, "grp-37", 1, protocol.EvtMessagePosted, "")
	if g, seq, ok := eventSeq(c.read()); !ok || g != "grp-37" || seq != 3 {
		t.Fatalf("live event %s/%d, want grp-37/3", g, seq)
	}
}

// A Backend that is no ChangeNotifier still gets replay then live events
// of every Group, through its Changed channels.
func TestServeStreamsWithoutNotifier(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	groups := []string{"grp-a", "grp-b", "grp-c"}
	for _, g := range groups {
		fb.addGroup(g, "w1")
		fb.appendEvents(t, g, 3, protocol.EvtMessagePosted, "")
	}
	url, _ := startServer(t, plainBackend{fb}, Options{ReplayBatch: 2}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	subscribeAll(c, groups)
	readEvents(t, c, 9)
	fb.appendEvents(t, "grp-b", 1, protocol.EvtMessagePosted, "")
	fb.appendEvents(t, "grp-a", 1, protocol.EvtMessagePosted, "")
	got := map[string]uint64{}
	for range 2 {
		g, seq, _ := eventSeq(c.read())
		got[g] = seq
	}
	if got["grp-a"] != 4 || got["grp-b"] != 4 {
		t.Fatalf("live events %v, want grp-a/4 and grp-b/4", got)
	}
}
