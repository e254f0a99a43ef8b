package client

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

func applyRaw(t *testing.T, s *queue.Store, raws ...[]byte) {
	t.Helper()
	var batch []queue.Incoming
	for _, raw := range raws {
		in, err := queue.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, in)
	}
	if _, err := s.Apply(batch); err != nil {
		t.Fatal(err)
	}
}

func TestHelloAndSubscribeFromDurableCursors(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	logA := groupLog(t, "grp-a", 12)
	fs.setLog("grp-a", logA)
	fs.setLog("grp-b", groupLog(t, "grp-b", 3))
	store := openStore(t, t.TempDir())
	defer store.Close()
	applyRaw(t, store, logA[:5]...) // already durable from an earlier run

	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-b"}, SessionEpoch: 7})
	waitFor(t, r.sig, "both groups caught up", func() bool {
		return store.Cursor("grp-a") == 12 && store.Cursor("grp-b") == 3
	})
	// The ACK of a cursor follows its commit: wait for it to reach the
	// server before stopping, or a stop right after the commit races it.
	waitFor(t, r.sig, "the final ACKs at the server", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		top := map[string]uint64{}
		for _, a := range fs.acks {
			top[a.GroupID] = max(top[a.GroupID], a.Sequence)
		}
		return top["grp-a"] == 12 && top["grp-b"] == 3
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}

	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.hellos) != 1 {
		t.Fatalf("%d HELLOs, want 1", len(fs.hellos))
	}
	h := fs.hellos[0]
	if h.AgentID != agentID || h.SessionEpoch != 7 || !slices.Equal(h.ProtocolVersions, []string{"0.1"}) || len(h.Proof.Nonce) < 16 {
		t.Fatalf("HELLO = %+v", h)
	}
	// grp-a from below its cursor: the newest applied events come again,
	// compared with the stored ones (diverge.go).
	want := []protocol.GroupPosition{{GroupID: "grp-a", AfterSequence: 5 - queue.OverlapEvents}, {GroupID: "grp-b", AfterSequence: 0}}
	if !slices.Equal(fs.subs, want) {
		t.Fatalf("SUBSCRIBE positions %+v, want %+v", fs.subs, want)
	}
	if c, ok := r.st.last(StateConnected); !ok || c.SessionEpoch != 7 || c.ServerTime.IsZero() {
		t.Fatalf("Connected state change = %+v", c)
	}
	if r.st.count(StateStopped) != 1 || r.c.State() != StateStopped {
		t.Fatalf("final state %v, stopped reported %d times", r.c.State(), r.st.count(StateStopped))
	}
	top := map[string]uint64{}
	for _, a := range fs.acks {
		top[a.GroupID] = max(top[a.GroupID], a.Sequence)
	}
	if top["grp-a"] != 12 || top["grp-b"] != 3 {
		t.Fatalf("highest ACKs %v", top)
	}
}

// TestDuplicatesReorderedGapsTwoGroups: every event arrives 2–5 times,
// shuffled, some withheld (gaps healed by replay), two Groups interleaved
// on one connection; the store ends exactly as an in-order replay.
func TestDuplicatesReorderedGapsTwoGroups(t *testing.T) {
	noLeaks(t)
	for _, seed := range []uint64{1, 2, 3} {
		fs := newFakeServer(t, nil)
		fs.seed = seed
		logs := map[string][][]byte{"grp-a": groupLog(t, "grp-a", 40), "grp-b": groupLog(t, "grp-b", 30)}
		for g, l := range logs {
			fs.setLog(g, l)
		}
		fs.mangle = shuffleDup(8, 0.1)
		store := openStore(t, t.TempDir())
		r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a", "grp-b"}})
		waitFor(t, r.sig, "both groups complete", func() bool {
			return store.Cursor("grp-a") == 40 && store.Cursor("grp-b") == 30
		})
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		sameStore(t, store, referenceStore(t, logs), "grp-a", "grp-b")
		store.Close()
	}
}

// A connection cut mid-stream: the worker subscribes again from its
// durable cursor, less the overlap it compares (queue.OverlapEvents), so
// the events around the cut come twice and are dropped as duplicates.
// The cut comes once the cursor is durable at 25 (a count, not a time: a
// cut after some number of frames left the cursor anywhere from 0 under
// load).
func TestReconnectMidStreamWithDuplicatesAroundTheCut(t *testing.T) {
	noLeaks(t)
	const cut = 25
	fs := newFakeServer(t, nil)
	logs := map[string][][]byte{"grp-a": groupLog(t, "grp-a", 50)}
	fs.setLog("grp-a", logs["grp-a"][:cut])
	fs.mangle = shuffleDup(4, 0)
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a"}})
	waitFor(t, r.sig, "the first half", func() bool { return store.Cursor("grp-a") == cut })
	fs.kill()
	fs.appendLive("grp-a", logs["grp-a"][cut:]...)
	waitFor(t, r.sig, "group complete", func() bool { return store.Cursor("grp-a") == 50 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	hellos, _, _, _ := fs.snapshot()
	if hellos < 2 || r.st.count(StateDisconnected) < 1 {
		t.Fatalf("%d HELLOs and %d disconnects; the cut did not happen", hellos, r.st.count(StateDisconnected))
	}
	fs.mu.Lock()
	second := fs.subs[1]
	fs.mu.Unlock()
	if want := uint64(cut - queue.OverlapEvents); second.AfterSequence != want {
		t.Fatalf("re-SUBSCRIBE after %d: want the durable cursor %d less the overlap, %d", second.AfterSequence, cut, want)
	}
	sameStore(t, store, referenceStore(t, logs), "grp-a")
}

func TestLiveEventsTwoGroupsInterleaved(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a", "grp-b"}})
	waitFor(t, r.sig, "subscribed", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return len(fs.subs) == 2
	})
	logs := map[string][][]byte{"grp-a": groupLog(t, "grp-a", 20), "grp-b": groupLog(t, "grp-b", 20)}
	for i := range 20 {
		fs.appendLive("grp-a", logs["grp-a"][i])
		fs.appendLive("grp-b", logs["grp-b"][i])
	}
	waitFor(t, r.sig, "both complete", func() bool {
		return store.Cursor("grp-a") == 20 && store.Cursor("grp-b") == 20
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	sameStore(t, store, referenceStore(t, logs), "grp-a", "grp-b")
}

// TestAckNeverAheadOfDurableCursor withholds event 5 so 6..20 wait in the
// reorder buffer: no ACK may pass 4, however much arrived, until 5 comes.
func TestAckNeverAheadOfDurableCursor(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	log := groupLog(t, "grp-a", 20)
	fs.setLog("grp-a", log)
	withhold := func(_ *rand.Rand, frames [][]byte) [][]byte {
		return slices.DeleteFunc(frames, func(f []byte) bool { return bytes.Contains(f, []byte(`"s-ev-grp-a-5"`)) })
	}
	fs.mangle = withhold
	store := openStore(t, t.TempDir())
	defer store.Close()
	fs.ackCheck = func(c protocol.Cursor) {
		if d := store.Cursor(c.GroupID); c.Sequence > d {
			t.Errorf("ACK %s:%d ahead of the durable cursor %d", c.GroupID, c.Sequence, d)
		}
	}
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a"}})
	waitFor(t, r.sig, "events after the gap held and a replay asked", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		b := store.Buffers()
		return len(b) == 1 && b[0].Events == 15 && len(fs.subs) >= 2
	})
	_, _, acks, _ := fs.snapshot()
	for _, a := range acks {
		if a.Sequence > 4 {
			t.Fatalf("ACK %+v past the gap at 5", a)
		}
	}
	fs.mu.Lock()
	fs.mangle = nil // heal: the next replay carries event 5
	fs.mu.Unlock()
	waitFor(t, r.sig, "gap healed and ACKed", func() bool {
		_, _, acks, _ := fs.snapshot()
		return store.Cursor("grp-a") == 20 && len(acks) > 0 && acks[len(acks)-1].Sequence == 20
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestEventWithBadSignatureIsNotApplied(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	log := groupLog(t, "grp-a", 6)
	forged := slices.Clone(log)
	forged[2] = signedEvent(t, "grp-a", 3, otherKey)
	fs.setLog("grp-a", forged)
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a"}})
	waitFor(t, r.sig, "events after the forged one held", func() bool {
		b := store.Buffers()
		return store.Cursor("grp-a") == 2 && len(b) == 1 && b[0].Events == 3
	})
	fs.setLog("grp-a", log) // the authority's real log; the gap replay heals
	waitFor(t, r.sig, "real event applied", func() bool { return store.Cursor("grp-a") == 6 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	sameStore(t, store, referenceStore(t, map[string][][]byte{"grp-a": log}), "grp-a")
}

func TestSessionReplacedAndUnsupportedVersionAreFatal(t *testing.T) {
	noLeaks(t)
	tests := []struct {
		code      protocol.Code
		state     State
		replaced  bool
		wantCount int
	}{
		{protocol.CodeAuthStaleSession, StateSessionReplaced, true, 1},
		{protocol.CodeUnsupportedVersion, StateStopped, false, 1},
	}
	for _, tt := range tests {
		t.Run(string(tt.code), func(t *testing.T) {
			fs := newFakeServer(t, nil)
			fs.helloErr = protocol.Errorf(tt.code, "no")
			store := openStore(t, t.TempDir())
			defer store.Close()
			r := startClient(t, fs, Config{Store: store})
			err := r.wait(t)
			if !errors.Is(err, &protocol.Error{Code: tt.code}) || errors.Is(err, ErrSessionReplaced) != tt.replaced {
				t.Fatalf("Run = %v", err)
			}
			if r.c.State() != tt.state || r.st.count(tt.state) != tt.wantCount {
				t.Fatalf("state %v, %d reports of %v", r.c.State(), r.st.count(tt.state), tt.state)
			}
			if hellos, _, _, _ := fs.snapshot(); hellos != 1 {
				t.Fatalf("%d HELLOs: a fatal error must not be retried", hellos)
			}
		})
	}
}

func TestAuthInvalidSignatureIsRetried(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	fs.helloErr = protocol.Errorf(protocol.CodeAuthInvalidSignature, "stale proof")
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store})
	waitFor(t, r.sig, "three attempts", func() bool { h, _, _, _ := fs.snapshot(); return h >= 3 })
	fs.mu.Lock()
	fs.helloErr = nil
	fs.mu.Unlock()
	waitFor(t, r.sig, "connected", func() bool { return r.c.State() == StateConnected })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestGroupNotFoundIsReported(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	fs.unknown["grp-x"] = true
	fs.setLog("grp-a", groupLog(t, "grp-a", 2))
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a", "grp-x"}})
	waitFor(t, r.sig, "rejection and progress", func() bool {
		return r.st.count(StateGroupRejected) == 1 && store.Cursor("grp-a") == 2
	})
	ch, _ := r.st.last(StateGroupRejected)
	if ch.GroupID != "grp-x" || protocol.CodeOf(ch.Err) != protocol.CodeGroupNotFound {
		t.Fatalf("rejection = %+v", ch)
	}
	if r.c.State() != StateConnected {
		t.Fatalf("a rejected Group must not end the connection: %v", r.c.State())
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestClosedStoreStopsRun(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	store := openStore(t, t.TempDir())
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a"}})
	waitFor(t, r.sig, "subscribed", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return len(fs.served) == 1
	})
	store.Close()
	fs.appendLive("grp-a", groupLog(t, "grp-a", 1)...)
	if err := r.wait(t); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Run = %v, want queue.ErrClosed", err)
	}
	if r.c.State() != StateStopped {
		t.Fatalf("state %v", r.c.State())
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	store := openStore(t, t.TempDir())
	defer store.Close()
	good := Config{URL: "wss://authority.example/mwp", AgentID: agentID, Key: agentKey, Store: store}
	if _, err := New(good); err != nil {
		t.Fatalf("New(good) = %v", err)
	}
	fetch := func(context.Context, protocol.SnapshotRef) ([]byte, error) { return nil, nil }
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"plain ws without the loopback option", func(c *Config) { c.URL = "ws://127.0.0.1:1/mwp" }},
		{"no agent", func(c *Config) { c.AgentID = "" }},
		{"no key", func(c *Config) { c.Key = protocol.PrivateKey{} }},
		{"short key", func(c *Config) { c.Key.Key = c.Key.Key[:10] }},
		{"no store", func(c *Config) { c.Store = nil }},
		{"snapshots without a signature check", func(c *Config) { c.FetchSnapshot = fetch }},
		{"two trust modes", func(c *Config) { c.Trust = Trust{Pin: certPin(nil), CAPEM: []byte("x")} }},
	}
	for _, tt := range tests {
		cfg := good
		tt.edit(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted it", tt.name)
		}
	}
}

// TestRedeliverReplaysAndTheStoreDropsDuplicates asks the authority for a
// Group's events again: a SUBSCRIBE from the older position goes out, the
// events arrive again and the store applies nothing twice.
func TestRedeliverReplaysAndTheStoreDropsDuplicates(t *testing.T) {
	noLeaks(t)
	fs := newFakeServer(t, nil)
	store := openStore(t, t.TempDir())
	defer store.Close()
	r := startClient(t, fs, Config{Store: store, Groups: []string{"grp-a"}})
	logs := map[string][][]byte{"grp-a": groupLog(t, "grp-a", 10)}
	waitFor(t, r.sig, "subscribed", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return len(fs.subs) == 1
	})
	fs.appendLive("grp-a", logs["grp-a"]...)
	waitFor(t, r.sig, "applied", func() bool { return store.Cursor("grp-a") == 10 })
	r.c.Redeliver("grp-a", 3)
	waitFor(t, r.sig, "replay subscription", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return len(fs.subs) == 2 && fs.subs[1].AfterSequence == 3
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	sameStore(t, store, referenceStore(t, logs), "grp-a")
}
