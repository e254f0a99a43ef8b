package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// wssBackend is a small Group Authority behind the real wss server: Group
// logs of signed events, a retention floor answered with CURSOR_TOO_OLD
// and a snapshot reference, and Commands answered with an event they
// caused.
type wssBackend struct {
	mu       sync.Mutex
	epoch    uint64
	replaced chan struct{} // closed by replaceSession
	nonces   map[string]bool
	logs     map[string][][]byte
	floors   map[string]protocol.SnapshotRef
	changed  map[string]chan struct{}
	acked    map[string]uint64
	submits  [][]byte
}

func newWSSBackend() *wssBackend {
	return &wssBackend{epoch: 1, nonces: map[string]bool{}, logs: map[string][][]byte{},
		floors: map[string]protocol.SnapshotRef{}, changed: map[string]chan struct{}{}, acked: map[string]uint64{}}
}

func (b *wssBackend) Now() time.Time { return time.Now() }

func (b *wssBackend) SessionEpoch(string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.epoch
}

func (b *wssBackend) SessionReplaced(_ string, epoch uint64) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.replaced == nil {
		b.replaced = make(chan struct{})
	}
	if epoch != b.epoch {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return b.replaced
}

// replaceSession opens session epoch of the agent elsewhere.
func (b *wssBackend) replaceSession(epoch uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.epoch = epoch
	if b.replaced != nil {
		close(b.replaced)
	}
	b.replaced = make(chan struct{})
}

func (b *wssBackend) Hello(_ context.Context, h *protocol.Hello) (uint64, error) {
	raw, _ := json.Marshal(h.Proof)
	doc, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		return 0, err
	}
	if err := protocol.VerifyFresh(doc.(map[string]any), protocol.NewKeySet(agentKey.Public()), time.Now(), protocol.DefaultMaxSkew); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nonces[h.Proof.Nonce] {
		return 0, protocol.Errorf(protocol.CodeAuthInvalidSignature, "nonce reused")
	}
	b.nonces[h.Proof.Nonce] = true
	if h.SessionEpoch != b.epoch {
		return 0, protocol.Errorf(protocol.CodeAuthStaleSession, "epoch %d is not %d", h.SessionEpoch, b.epoch)
	}
	return b.epoch, nil
}

func (b *wssBackend) Submit(_ context.Context, _ string, raw []byte) (*protocol.Receipt, error) {
	var cmd struct {
		ActionID string `json:"actionId"`
		GroupID  string `json:"groupId"`
	}
	if err := json.Unmarshal(raw, &cmd); err != nil {
		return nil, protocol.Errorf(protocol.CodeSchemaValidationFailed, "%v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.submits = append(b.submits, raw)
	seq := uint64(len(b.logs[cmd.GroupID]) + 1)
	rev := uint64(1)
	ev := protocol.Event{
		EventID: "evt-" + cmd.ActionID, GroupID: cmd.GroupID, Sequence: &seq,
		Aggregate: &protocol.Aggregate{Kind: protocol.AggregateMessage, ID: "msg-" + cmd.ActionID}, Revision: &rev,
		Type: protocol.EvtMessagePosted, Actor: protocol.Actor{Kind: protocol.ActorAgent, ID: agentID},
		CausationID: cmd.ActionID, CorrelationID: "mis-" + cmd.GroupID,
		OccurredAt: protocol.NewTime(t0), AcceptedBy: "authority-1",
	}
	ev.Payload, _ = json.Marshal(map[string]any{"messageId": "msg-" + cmd.ActionID, "author": ev.Actor, "text": "hi", "state": "posted"})
	evRaw, err := protocol.SignedEvent(&ev, authorityKey)
	if err != nil {
		return nil, err
	}
	b.appendLocked(cmd.GroupID, evRaw)
	return &protocol.Receipt{ActionID: cmd.ActionID, Events: protocol.List[protocol.EventRef]{{EventID: ev.EventID, GroupID: cmd.GroupID, Sequence: &seq}}}, nil
}

func (b *wssBackend) appendLocked(group string, raws ...[]byte) {
	b.logs[group] = append(b.logs[group], raws...)
	if ch := b.changed[group]; ch != nil {
		close(ch)
		delete(b.changed, group)
	}
}

func (b *wssBackend) Authorize(_, groupID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.logs[groupID]; !ok {
		return protocol.Errorf(protocol.CodeGroupNotFound, "no group %s", groupID)
	}
	return nil
}

func (b *wssBackend) Events(groupID string, after uint64, max int) ([]wss.StoredEvent, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ref, ok := b.floors[groupID]; ok && after < ref.Sequence {
		e := protocol.Errorf(protocol.CodeCursorTooOld, "sequence %d is no longer online", after)
		e.Details = map[string]any{"snapshot": ref}
		return nil, e
	}
	var out []wss.StoredEvent
	log := b.logs[groupID]
	for i := after; i < uint64(len(log)) && len(out) < max; i++ {
		var ev protocol.Event
		if err := json.Unmarshal(log[i], &ev); err != nil {
			return nil, err
		}
		out = append(out, wss.StoredEvent{Sequence: i + 1, Type: ev.Type, Raw: log[i]})
	}
	return out, nil
}

func (b *wssBackend) Changed(groupID string, after uint64) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if uint64(len(b.logs[groupID])) > after {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if b.changed[groupID] == nil {
		b.changed[groupID] = make(chan struct{})
	}
	return b.changed[groupID]
}

func (b *wssBackend) Acked(peer, groupID string, sequence uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if peer != agentID {
		panic(fmt.Sprintf("ACK from %s", peer))
	}
	b.acked[groupID] = max(b.acked[groupID], sequence)
}

// TestAgainstWSSServer runs the client against authority-lite's real wss
// server over TLS 1.3 with a pinned self-signed certificate: replay of two
// Groups, a CURSOR_TOO_OLD restored from a snapshot, an unknown Group, a
// Command whose event comes back, and a session replaced while connected.
func TestAgainstWSSServer(t *testing.T) {
	noLeaks(t)
	cert, pin, err := wss.LoadOrCreateCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := newWSSBackend()
	logs := map[string][][]byte{"grp-a": groupLog(t, "grp-a", 25), "grp-b": groupLog(t, "grp-b", 40)}
	b.logs["grp-a"], b.logs["grp-b"] = logs["grp-a"], logs["grp-b"]
	snap, ref := snapshotOf(t, "grp-b", 30, authorityKey)
	b.floors["grp-b"] = ref

	// The handler serves through the current wss.Server so the test can
	// cut connections (Close) and keep accepting (a new Server).
	var cur atomic.Pointer[wss.Server]
	cur.Store(wss.NewServer(b, wss.Options{Tick: 10 * time.Millisecond}))
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur.Load().Handler().ServeHTTP(w, r)
	}))
	ts.TLS = wss.TLSConfig(cert)
	ts.StartTLS()
	t.Cleanup(func() {
		cur.Load().Close()
		ts.Close()
	})
	url := "wss://" + ts.Listener.Addr().String() + "/mwp"

	store := openStore(t, t.TempDir())
	defer store.Close()
	sig := newSignal()
	st := &states{sig: sig}
	c, err := New(Config{
		URL: url, Trust: Trust{Pin: pin}, AgentID: agentID, Key: agentKey, SessionEpoch: 1,
		Store: store, Groups: []string{"grp-a", "grp-b", "grp-nope"}, AuthorityKeys: authorityKeys(),
		FetchSnapshot: func(_ context.Context, got protocol.SnapshotRef) ([]byte, error) {
			if got != ref {
				return nil, fmt.Errorf("unexpected snapshot %+v", got)
			}
			return snap, nil
		},
		Backoff: Backoff{Base: time.Millisecond, Cap: 10 * time.Millisecond}, PingInterval: 20 * time.Millisecond,
		OnState: st.on, OnApplied: func(queue.Result) { sig.kick() }, Logger: quietLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	defer func() {
		rcancel()
		<-done
	}()

	waitFor(t, sig, "replay of both Groups", func() bool {
		return store.Cursor("grp-a") == 25 && store.Cursor("grp-b") == 40 && st.count(StateGroupRejected) == 1
	})
	if ch, _ := st.last(StateGroupRejected); ch.GroupID != "grp-nope" {
		t.Fatalf("rejected %+v", ch)
	}
	sameStore(t, store, referenceStore(t, map[string][][]byte{"grp-a": logs["grp-a"]}), "grp-a")
	if m, _ := store.Mission("grp-b"); m.Revision != 4 {
		t.Fatalf("grp-b mission %+v: not restored from the snapshot", m)
	}

	rc, err := c.Send(context.Background(), signedCommand(t, "act-w1", "grp-a"))
	if err != nil || rc.ActionID != "act-w1" || len(rc.Events) != 1 {
		t.Fatalf("Send = %+v, %v", rc, err)
	}
	waitFor(t, sig, "the Command's event applied and ACKed", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return store.Cursor("grp-a") == 26 && b.acked["grp-a"] == 26 && b.acked["grp-b"] == 40
	})
	if raw, _ := store.Event("grp-a", 26); !json.Valid(raw) {
		t.Fatal("event 26 missing")
	}
	if n := st.count(StateConnected); n != 1 {
		t.Fatalf("%d connections: PINGs every 20ms must keep one alive", n)
	}

	// A newer session of this agent opens: the server ends this session's
	// connection with AUTH_STALE_SESSION, and Run stops for good.
	b.replaceSession(2)
	select {
	case err := <-done:
		done <- err
		if !errors.Is(err, ErrSessionReplaced) || protocol.CodeOf(err) != protocol.CodeAuthStaleSession {
			t.Fatalf("Run = %v, want ErrSessionReplaced", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not end after the session was replaced")
	}
	if st.count(StateSessionReplaced) != 1 {
		t.Fatal("session replacement not reported")
	}
}
