package wss

import (
	"context"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Backend is the Group Authority behind the WebSocket binding. The
// authority-lite Service implements it; tests use fakes. Every error
// returned is a *protocol.Error whose code goes on the wire unchanged.
type Backend interface {
	// Now is the authority's clock (injected; tests use a fake).
	Now() time.Time
	// Hello checks a client HELLO after the server checked the frame shape
	// and protocol version: the proof signature, the agent's key, the
	// freshness of issuedAt, a never-reused nonce (AUTH_INVALID_SIGNATURE)
	// and the session epoch (AUTH_STALE_SESSION). It returns the session
	// epoch the server answers with.
	Hello(ctx context.Context, h *protocol.Hello) (sessionEpoch uint64, err error)
	// SessionEpoch is the agent's current session epoch (0 before its
	// first session).
	SessionEpoch(agentID string) uint64
	// SessionReplaced returns a channel closed once epoch is no longer the
	// agent's current session epoch (immediately closed if it already is
	// not). The server ends every connection of a replaced session.
	SessionReplaced(agentID string, epoch uint64) <-chan struct{}
	// Submit runs one Command's signed bytes through the whole pipeline and
	// returns its receipt only after the events are durable. peer is the
	// agent authenticated by HELLO; a command signed by another actor is
	// accepted only if the backend allows relaying it (humans through a UI).
	Submit(ctx context.Context, peer string, raw []byte) (*protocol.Receipt, error)
	// Authorize reports whether peer may read a Group: GROUP_NOT_FOUND for
	// both unknown and forbidden Groups.
	Authorize(peer, groupID string) error
	// Events returns up to max events of a Group with sequence > after, as
	// the JCS bytes of signed envelopes in sequence order. CURSOR_TOO_OLD
	// (with the snapshot reference in details) when after is below what is
	// kept online.
	Events(groupID string, after uint64, max int) ([]StoredEvent, error)
	// Changed returns a channel closed when the Group's last sequence moves
	// past after (immediately closed if it already has).
	Changed(groupID string, after uint64) <-chan struct{}
	// Acked records a client's durable cursor for a Group (observability,
	// snapshot retention); it must not fail the connection.
	Acked(peer, groupID string, sequence uint64)
}

// ChangeNotifier is what a Backend may add so a connection waits for the
// next events of every Group it streams without a goroutine per Group:
// with it, an idle subscription costs a registered callback, not a
// goroutine (docs/wire.md; wss/doc.go "Streaming").
type ChangeNotifier interface {
	// OnChange calls fn once, from any goroutine, when the Group's last
	// sequence moves past after (at once if it already has), unless the
	// returned cancel ran first. fn must not block; cancel may be called
	// more than once, also after fn ran.
	OnChange(groupID string, after uint64, fn func()) (cancel func())
}

// Closer is what a Backend may add so a stream ends once it has sent a
// Group's last event ever (an archived Group takes no more commands): a
// connection then keeps nothing for a Group that is over, though the
// binding has no UNSUBSCRIBE and a worker that forgot the Group never
// subscribes it again on that connection.
type Closer interface {
	// Closed reports the Group's last sequence when its log is closed for
	// good; ok is false while it may still grow (or is unknown).
	Closed(groupID string) (last uint64, ok bool)
}

// MemberGroups is what a Backend may add so the server tells each agent
// its Groups (ours, docs/wire.md; spec 17 has no frame for it): the HELLO
// answer lists them and a GROUPS frame follows every change.
type MemberGroups interface {
	// MemberGroups lists, sorted, the Groups the agent is an active member of.
	MemberGroups(agentID string) []string
	// MembershipChanged returns a channel closed at the next membership
	// change in any Group.
	MembershipChanged() <-chan struct{}
}

// Pipeliner is a Backend that can decide a Command before the writes of
// the ones decided before it are durable. Begin decides raw now and
// returns a function, to be called once and at once (the backend may hold
// later writes until it runs), that waits for durability and gives
// Submit's answer. The server then begins a Group's Commands in arrival
// order without waiting for each answer, so one group commit can carry
// several Commands of one connection.
type Pipeliner interface {
	Begin(ctx context.Context, peer string, raw []byte) func() (*protocol.Receipt, error)
}

// StoredEvent is one event as kept in the log.
type StoredEvent struct {
	Sequence uint64
	Type     protocol.EventType
	// WorkItemID is the aggregate id when the aggregate is a WorkItem, for
	// SUBSCRIBE filters.
	WorkItemID string
	// Raw is the signed event envelope's JCS bytes, shared with other
	// readers: never written to.
	Raw []byte
}
