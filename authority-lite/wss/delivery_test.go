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

// purge deletes a Group as the Service's purge does: its reads answer
// GROUP_NOT_FOUND and every stream waiting on it is woken.
func (f *fakeBackend) purge(groupID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eventsErr[groupID] = protocol.Errorf(protocol.CodeGroupNotFound, "group %s not found", groupID)
	g := f.groups[groupID]
	close(g.changed)
	g.changed = make(chan struct{})
	for id, fn := range g.waiters {
		delete(g.waiters, id)
		fn()
	}
}

// A stream that ends (its Group purged: GROUP_NOT_FOUND) gives back what
// the connection kept for it, so MaxGroups counts the Groups streamed
// now, not every Group the connection ever streamed: a long-lived worker
// connection that follows one Mission after another could otherwise not
// SUBSCRIBE a new Group after MaxGroups of them, however many ended.
func TestServeEndedStreamsFreeTheirPlace(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
			fb := newFakeBackend(t)
			key := fb.addAgent(t, "w1", 3)
			for _, g := range []string{"grp-a", "grp-b", "grp-c"} {
				fb.addGroup(g, "w1")
				fb.appendEvents(t, g, 1, protocol.EvtMessagePosted, "")
			}
			var b Backend = fb
			if plain {
				b = plainBackend{fb}
			}
			url, _ := startServer(t, b, Options{MaxGroups: 2}, nil)
			c := openClient(t, url, fb, key, testNonce, nil)
			subscribeAll(c, []string{"grp-a", "grp-b"})
			readEvents(t, c, 2)
			fb.purge("grp-a")
			if e, ok := c.read().(*protocol.ErrorFrame); !ok || e.Error.Code != protocol.CodeGroupNotFound || e.Error.Details["groupId"] != "grp-a" {
				t.Fatalf("want ERROR GROUP_NOT_FOUND for grp-a, got %#v", e)
			}
			c.send(`{"type":"SUBSCRIBE","frameId":"s2","groups":[{"groupId":"grp-c","afterSequence":0}]}`)
			if g, seq, ok := eventSeq(c.read()); !ok || g != "grp-c" || seq != 1 {
				t.Fatal("grp-c not streamed after grp-a's stream ended: the connection still counts it")
			}
			// Two streams run again: a third Group is still refused.
			c.send(`{"type":"SUBSCRIBE","frameId":"s3","groups":[{"groupId":"grp-a","afterSequence":0}]}`)
			if e, ok := c.read().(*protocol.ErrorFrame); !ok || e.Error.Code != protocol.CodeRateLimited {
				t.Fatalf("want RATE_LIMITED past MaxGroups, got %#v", e)
			}
		})
	}
}

// closingBackend is the fake with wss.Closer: a Group marked closed takes
// no more events (an archived Group, for the Service).
type closingBackend struct {
	*fakeBackend
	closed map[string]bool // under fakeBackend.mu
}

func (b closingBackend) Closed(groupID string) (uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed[groupID] {
		return 0, false
	}
	return uint64(len(b.groups[groupID].events)), true
}

// A stream ends once it has sent a closed Group's last event, live (its
// group.archived just appended) or at the end of its replay, and frees
// its place: a worker connection that outlives many Missions keeps
// nothing for the Groups that are over, though it never unsubscribes.
func TestServeClosedGroupStreamEnds(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	for _, g := range []string{"grp-a", "grp-b", "grp-c"} {
		fb.addGroup(g, "w1")
		fb.appendEvents(t, g, 1, protocol.EvtMessagePosted, "")
	}
	b := closingBackend{fb, map[string]bool{}}
	url, _ := startServer(t, b, Options{MaxGroups: 1}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	subscribeAll(c, []string{"grp-a"})
	readEvents(t, c, 1)
	fb.mu.Lock()
	b.closed["grp-a"] = true
	fb.mu.Unlock()
	fb.appendEvents(t, "grp-a", 1, protocol.EvtGroupArchived, "")
	if g, seq, ok := eventSeq(c.read()); !ok || g != "grp-a" || seq != 2 {
		t.Fatalf("want grp-a's group.archived, got %s/%d", g, seq)
	}
	// grp-b's stream may start only once grp-a's ended.
	fb.mu.Lock()
	b.closed["grp-b"] = true
	fb.mu.Unlock()
	c.send(`{"type":"SUBSCRIBE","frameId":"s2","groups":[{"groupId":"grp-b","afterSequence":0}]}`)
	if g, seq, ok := eventSeq(c.read()); !ok || g != "grp-b" || seq != 1 {
		t.Fatal("grp-b not streamed: grp-a's stream still counts after its last event")
	}
	// grp-b was closed already: its stream ended with its replay.
	c.send(`{"type":"SUBSCRIBE","frameId":"s3","groups":[{"groupId":"grp-c","afterSequence":0}]}`)
	if g, seq, ok := eventSeq(c.read()); !ok || g != "grp-c" || seq != 1 {
		t.Fatal("grp-c not streamed: grp-b's stream still counts after its replay")
	}
	// grp-c is open: its stream runs on and counts.
	c.send(`{"type":"SUBSCRIBE","frameId":"s4","groups":[{"groupId":"grp-a","afterSequence":2}]}`)
	if e, ok := c.read().(*protocol.ErrorFrame); !ok || e.Error.Code != protocol.CodeRateLimited {
		t.Fatalf("want RATE_LIMITED past MaxGroups, got %#v", e)
	}
}
