package wss

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// fakeBackend is an in-memory Group Authority: per Group a log of signed
// events, a retention floor (CURSOR_TOO_OLD below it) and a Changed channel.
type fakeBackend struct {
	clock *clock.Fake
	auth  protocol.PrivateKey // signs events

	mu     sync.Mutex
	agents protocol.KeySet
	epochs map[string]uint64 // current session epoch per agent
	// replaced is closed when the agent's session epoch moves (setEpoch).
	replaced   map[string]chan struct{}
	nonces     map[string]bool
	groups     map[string]*fakeGroup
	nextWaiter int
	acked      map[string]uint64 // "peer/group" -> sequence
	submits    []fakeSubmit
	// submitHook, when set, runs inside Submit before the default handling
	// (tests block or fail commands with it).
	submitHook func(ctx context.Context, raw []byte) (*protocol.Receipt, error)
	// authorizeErr overrides Authorize for one group.
	authorizeErr map[string]error
	// eventsErr overrides Events for one group.
	eventsErr map[string]error
}

type fakeSubmit struct {
	peer string
	raw  []byte
}

type fakeGroup struct {
	readers map[string]bool
	events  []StoredEvent // sequence i+1 at index i
	floor   uint64        // events at or below floor are no longer online
	changed chan struct{} // closed and replaced on append
	waiters map[int]func()
}

var testStart = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func newFakeBackend(t testing.TB) *fakeBackend {
	t.Helper()
	k, err := protocol.GenerateKey("service:authority-1#k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeBackend{
		clock: clock.NewFake(testStart), auth: k,
		agents: protocol.KeySet{}, epochs: map[string]uint64{}, replaced: map[string]chan struct{}{}, nonces: map[string]bool{},
		groups: map[string]*fakeGroup{}, acked: map[string]uint64{},
		authorizeErr: map[string]error{}, eventsErr: map[string]error{},
	}
}

// addAgent registers an agent key and its current session epoch.
func (f *fakeBackend) addAgent(t testing.TB, agentID string, epoch uint64) protocol.PrivateKey {
	t.Helper()
	k, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorAgent, agentID, "k1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agents[k.KeyID] = k.Public().Key
	f.epochs[agentID] = epoch
	return k
}

// setEpoch moves an agent to a new session epoch, replacing the old one.
func (f *fakeBackend) setEpoch(agentID string, epoch uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epochs[agentID] = epoch
	if ch := f.replaced[agentID]; ch != nil {
		close(ch)
		delete(f.replaced, agentID)
	}
}

func (f *fakeBackend) SessionEpoch(agentID string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epochs[agentID]
}

func (f *fakeBackend) SessionReplaced(agentID string, epoch uint64) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.epochs[agentID] != epoch {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	ch := f.replaced[agentID]
	if ch == nil {
		ch = make(chan struct{})
		f.replaced[agentID] = ch
	}
	return ch
}

// addGroup creates a Group readable by readers.
func (f *fakeBackend) addGroup(groupID string, readers ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := &fakeGroup{readers: map[string]bool{}, changed: make(chan struct{})}
	for _, r := range readers {
		g.readers[r] = true
	}
	f.groups[groupID] = g
}

// appendEvents appends n signed events of type typ on workItem (if any).
func (f *fakeBackend) appendEvents(t testing.TB, groupID string, n int, typ protocol.EventType, workItem string) {
	t.Helper()
	for range n {
		if _, err := f.appendSigned(groupID, typ, workItem); err != nil {
			t.Fatal(err)
		}
	}
}

// appendSigned appends one signed event and returns its sequence.
func (f *fakeBackend) appendSigned(groupID string, typ protocol.EventType, workItem string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[groupID]
	seq := uint64(len(g.events) + 1)
	agg, payload := fakeAggregatePayload(typ, groupID, workItem, seq, f.clock.Now())
	ev := &protocol.Event{
		EventID: fmt.Sprintf("evt-%s-%d", groupID, seq), GroupID: groupID, Sequence: protocol.Uint64(seq),
		Aggregate: agg, Revision: protocol.Uint64(seq), Type: typ,
		Actor:       protocol.Actor{Kind: protocol.ActorService, ID: "authority-1"},
		CausationID: "act-1", CorrelationID: "mis-" + groupID,
		OccurredAt: protocol.NewTime(f.clock.Now()), AcceptedBy: "authority-1",
		Payload: payload,
	}
	raw, err := protocol.SignedEvent(ev, f.auth)
	if err != nil {
		return 0, err
	}
	f.appendLocked(g, StoredEvent{Sequence: seq, Type: typ, WorkItemID: workItem, Raw: raw})
	return seq, nil
}

// fakeAggregatePayload gives an event of typ the aggregate and a payload
// its schema accepts (frames are checked against websocket-frame.schema.json).
func fakeAggregatePayload(typ protocol.EventType, groupID, workItem string, seq uint64, now time.Time) (*protocol.Aggregate, json.RawMessage) {
	at := protocol.NewTime(now)
	var p any
	switch typ {
	case protocol.EvtMessagePosted:
		id := fmt.Sprintf("msg-%d", seq)
		return &protocol.Aggregate{Kind: protocol.AggregateMessage, ID: id}, mustJSON(map[string]any{
			"messageId": id, "author": protocol.Actor{Kind: protocol.ActorService, ID: "authority-1"}, "text": "hello", "state": "posted"})
	case protocol.EvtGroupArchived:
		return &protocol.Aggregate{Kind: protocol.AggregateGroup, ID: groupID}, mustJSON(map[string]any{"snapshot": protocol.SnapshotRef{
			SnapshotID: "snap-" + groupID, GroupID: groupID, Sequence: seq - 1, Digest: protocol.Digest([]byte("snapshot")), URI: "mwp://snapshots/snap-" + groupID}})
	case protocol.EvtWorkStarted:
		p = map[string]any{"workItemId": workItem, "state": "active",
			"lease": protocol.ExecutionLease{LeaseID: "lse-" + workItem, AgentID: "w1", SessionEpoch: 3, WorkItemID: workItem, OwnershipEpoch: 1,
				StartedAt: at, ExpiresAt: protocol.NewTime(now.Add(time.Minute))},
			"ownership": protocol.OwnershipGrant{WorkItemID: workItem, OwnerAgentID: "w1", OwnershipEpoch: 1, StartDeadline: at}}
	case protocol.EvtWorkProgressed:
		p = map[string]any{"workItemId": workItem, "state": "active", "leaseId": "lse-" + workItem}
	case protocol.EvtWorkBlocked:
		p = map[string]any{"workItemId": workItem, "state": "blocked", "blocker": protocol.Resolution{Kind: protocol.ResolutionOther, Detail: "waiting"}}
	default:
		panic("fakeAggregatePayload: no payload for " + string(typ))
	}
	return &protocol.Aggregate{Kind: protocol.AggregateWorkItem, ID: workItem}, mustJSON(p)
}

func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

func (f *fakeBackend) appendLocked(g *fakeGroup, ev StoredEvent) {
	g.events = append(g.events, ev)
	close(g.changed)
	g.changed = make(chan struct{})
	for id, fn := range g.waiters {
		delete(g.waiters, id)
		fn()
	}
}

// OnChange makes the fake a ChangeNotifier, as the Service is; plain
// wraps it to test the Changed channel path.
func (f *fakeBackend) OnChange(groupID string, after uint64, fn func()) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[groupID]
	if uint64(len(g.events)) > after {
		fn()
		return func() {}
	}
	if g.waiters == nil {
		g.waiters = map[int]func(){}
	}
	f.nextWaiter++
	id := f.nextWaiter
	g.waiters[id] = fn
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(g.waiters, id)
	}
}

func (f *fakeBackend) setFloor(groupID string, floor uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups[groupID].floor = floor
}

func (f *fakeBackend) Now() time.Time { return f.clock.Now() }

func (f *fakeBackend) Hello(ctx context.Context, h *protocol.Hello) (uint64, error) {
	raw, err := json.Marshal(h.Proof)
	if err != nil {
		return 0, err
	}
	doc, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		return 0, err
	}
	if err := protocol.VerifyFresh(doc.(map[string]any), f.keys(), f.clock.Now(), protocol.DefaultMaxSkew); err != nil {
		return 0, err
	}
	if !protocol.KeyBelongsTo(h.Proof.Signature.KeyID, protocol.ActorAgent, h.AgentID) {
		return 0, protocol.Errorf(protocol.CodeAuthInvalidSignature, "key %s is not the agent's", h.Proof.Signature.KeyID)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nonces[h.Proof.Nonce] {
		return 0, protocol.Errorf(protocol.CodeAuthInvalidSignature, "nonce already used")
	}
	f.nonces[h.Proof.Nonce] = true
	if cur := f.epochs[h.AgentID]; h.SessionEpoch != cur {
		return 0, protocol.Errorf(protocol.CodeAuthStaleSession, "session epoch %d is not the current %d", h.SessionEpoch, cur)
	}
	return h.SessionEpoch, nil
}

func (f *fakeBackend) keys() protocol.KeySet {
	f.mu.Lock()
	defer f.mu.Unlock()
	ks := protocol.KeySet{}
	for k, v := range f.agents {
		ks[k] = v
	}
	return ks
}

// Submit records the command and, unless the hook decides, appends one
// message.posted event to the command's Group and returns its receipt.
func (f *fakeBackend) Submit(ctx context.Context, peer string, raw []byte) (*protocol.Receipt, error) {
	f.mu.Lock()
	f.submits = append(f.submits, fakeSubmit{peer: peer, raw: raw})
	hook := f.submitHook
	f.mu.Unlock()
	if hook != nil {
		return hook(ctx, raw)
	}
	var cmd struct {
		ActionID string `json:"actionId"`
		GroupID  string `json:"groupId"`
	}
	if err := json.Unmarshal(raw, &cmd); err != nil {
		return nil, protocol.Errorf(protocol.CodeSchemaValidationFailed, "%v", err)
	}
	f.mu.Lock()
	_, ok := f.groups[cmd.GroupID]
	f.mu.Unlock()
	if !ok {
		return nil, protocol.Errorf(protocol.CodeGroupNotFound, "group not found")
	}
	seq, err := f.appendSigned(cmd.GroupID, protocol.EvtMessagePosted, "")
	if err != nil {
		return nil, err
	}
	return &protocol.Receipt{ActionID: cmd.ActionID, Events: protocol.List[protocol.EventRef]{
		{EventID: "evt-" + cmd.ActionID, GroupID: cmd.GroupID, Sequence: protocol.Uint64(seq)},
	}}, nil
}

func (f *fakeBackend) Authorize(peer, groupID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err, ok := f.authorizeErr[groupID]; ok {
		return err
	}
	g, ok := f.groups[groupID]
	if !ok {
		return protocol.Errorf(protocol.CodeGroupNotFound, "no group %s", groupID)
	}
	if !g.readers[peer] {
		// A careless backend might say more; the server must hide it.
		return protocol.Errorf(protocol.CodeAuthForbidden, "%s is not a member of %s", peer, groupID)
	}
	return nil
}

func (f *fakeBackend) Events(groupID string, after uint64, max int) ([]StoredEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err, ok := f.eventsErr[groupID]; ok {
		return nil, err
	}
	g := f.groups[groupID]
	if after < g.floor {
		e := protocol.Errorf(protocol.CodeCursorTooOld, "sequence %d is no longer online", after)
		e.Details = map[string]any{"snapshot": map[string]any{
			"snapshotId": "snap-" + groupID, "groupId": groupID, "sequence": g.floor,
			"digest": protocol.Digest([]byte("snapshot")), "uri": "mwp://snapshots/snap-" + groupID,
		}}
		return nil, e
	}
	if after >= uint64(len(g.events)) {
		return nil, nil
	}
	end := min(int(after)+max, len(g.events))
	return append([]StoredEvent(nil), g.events[after:end]...), nil
}

func (f *fakeBackend) Changed(groupID string, after uint64) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[groupID]
	if uint64(len(g.events)) > after {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return g.changed
}

func (f *fakeBackend) Acked(peer, groupID string, sequence uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked[peer+"/"+groupID] = sequence
}

func (f *fakeBackend) ackedAt(peer, groupID string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acked[peer+"/"+groupID]
}

func (f *fakeBackend) submitted() []fakeSubmit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeSubmit(nil), f.submits...)
}

// helloFrame builds a client HELLO whose proof is signed with k.
func helloFrame(t testing.TB, k protocol.PrivateKey, agentID string, epoch uint64, nonce string, issuedAt time.Time, versions ...string) []byte {
	t.Helper()
	if len(versions) == 0 {
		versions = []string{ProtocolVersion}
	}
	proof := map[string]any{"agentId": agentID, "sessionEpoch": epoch, "nonce": nonce, "issuedAt": protocol.NewTime(issuedAt).String()}
	raw, err := protocol.SignedValue(proof, k)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{
		"type": "HELLO", "frameId": "c-hello", "protocolVersions": versions,
		"agentId": agentID, "sessionEpoch": epoch, "proof": json.RawMessage(raw),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
