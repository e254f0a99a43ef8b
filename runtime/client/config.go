package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// Store is what the connection needs of the worker's durable store;
// *queue.Store implements it.
type Store interface {
	// Commit makes one turn of the session loop durable: events, outbox
	// puts and removals in one transaction (queue.Store.Commit).
	Commit(b queue.Batch) (queue.Result, error)
	Cursor(groupID string) uint64
	// ReplayAfter is the position to subscribe from: the cursor less the
	// newest applied events the store can compare (queue.OverlapEvents).
	ReplayAfter(groupID string) uint64
	// Divergence reports a Group whose history contradicts the
	// authority's; such a Group is not subscribed.
	Divergence(groupID string) (queue.Divergence, bool)
	// MarkAhead records that the authority's log of a Group ends at last,
	// before the store's cursor (queue.Store.MarkAhead).
	MarkAhead(groupID string, last uint64) (queue.Divergence, bool, error)
	GroupIDs() []string
	RestoreSnapshot(ref protocol.SnapshotRef, doc []byte, verify func(map[string]any) error) (queue.Result, error)
	Outbox() iter.Seq2[queue.OutboxEntry, error]
}

// Tombstones is what a Store may add so the client leaves the Groups it
// forgot unsubscribed (queue.Store has it).
type Tombstones interface {
	Forgotten(groupID string) bool
	KeepTombstones(listed []string) error
}

// Config configures a Client. URL, AgentID, Key and Store are required.
type Config struct {
	// URL of the authority's WebSocket endpoint, wss://host:port/mwp.
	URL string
	// AllowInsecureLoopback permits ws:// to a loopback address (tests).
	AllowInsecureLoopback bool
	Trust                 Trust

	AgentID      string
	Key          protocol.PrivateKey // signs the HELLO proof
	SessionEpoch uint64

	Store Store
	// Groups to subscribe besides those the store already knows.
	Groups []string
	// IgnoreListed leaves the Groups the authority lists (HELLO, GROUPS)
	// unsubscribed: a connection that only opens the next session (the
	// worker's bootstrap) would see its subscriptions refused
	// AUTH_STALE_SESSION once that session replaces its own.
	IgnoreListed bool

	// AuthorityKeys verifies every event's signature before it reaches the
	// store. nil skips the check: tests only.
	AuthorityKeys protocol.KeyResolver
	// FetchSnapshot downloads the Group Snapshot a CURSOR_TOO_OLD names;
	// without it such a Group is reported rejected.
	FetchSnapshot func(ctx context.Context, ref protocol.SnapshotRef) ([]byte, error)
	// VerifySnapshot checks a snapshot's signature; nil means protocol.Verify
	// with AuthorityKeys.
	VerifySnapshot func(doc map[string]any) error

	Clock   clock.Timers   // nil: clock.Real
	Backoff Backoff        // zero: from 250ms, doubling up to 30s, full jitter
	Rand    func() float64 // uniform [0,1) draws for jitter; nil: math/rand/v2

	PingInterval     time.Duration // 0: 15s; negative: no PINGs
	PingTimeout      time.Duration // 0: 10s
	HandshakeTimeout time.Duration // dial, TLS and HELLO; 0: 10s
	WriteTimeout     time.Duration // one frame write; 0: 10s
	GapTimeout       time.Duration // wait for a gap to fill before replaying; 0: 2s
	RetryDelay       time.Duration // after RATE_LIMITED/BACKPRESSURE errors without retryAfterMs; 0: 1s
	// Freshness is how long after its issuedAt a Command may still be
	// sent; one that waited longer (offline, paused) is never sent stale
	// (spec 19): it leaves the outbox and its Send returns ErrStale, so
	// the sender builds it again. 0: no limit.
	Freshness     time.Duration
	MaxBatch      int // events per store transaction; 0: 256
	MaxFrameBytes int // largest inbound frame; 0: 2 MiB
	// DecodeWorkers decode and verify inbound frames in parallel (order
	// kept); 0: one per CPU, at most 4.
	DecodeWorkers int

	// Presence, when set, is attached to our PINGs.
	Presence func() *protocol.PresenceRecord
	// OnState is called on every connection state change, from the client's
	// goroutine; it must not block.
	OnState func(StateChange)
	// OnApplied is called after every store transaction the client made
	// (applied events, restored snapshots), from the client's goroutine;
	// it must not block. The runtime feeds the scheduler from it.
	OnApplied func(queue.Result)
	Logger    *slog.Logger
}

// State is the client's connection state.
type State int32

// The connection states.
const (
	StateIdle            State = iota // Run not active
	StateConnecting                   // dialing, TLS, HELLO
	StateConnected                    // HELLO answered; subscribed
	StateDisconnected                 // waiting to reconnect
	StateSessionReplaced              // AUTH_STALE_SESSION: Run returned; stop slots at a safe point
	StateStopped                      // Run returned for another reason
	// StateGroupRejected is not a connection state: a Group was refused
	// (GROUP_NOT_FOUND, or CURSOR_TOO_OLD without a way to restore).
	StateGroupRejected
)

func (s State) String() string {
	switch s {
	case StateIdle:
		return "idle"
	case StateConnecting:
		return "connecting"
	case StateConnected:
		return "connected"
	case StateDisconnected:
		return "disconnected"
	case StateSessionReplaced:
		return "session-replaced"
	case StateStopped:
		return "stopped"
	case StateGroupRejected:
		return "group-rejected"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// StateChange reports a state change to Config.OnState.
type StateChange struct {
	State State
	Err   error // why: Disconnected, SessionReplaced, Stopped, GroupRejected
	// Connected: the session epoch the authority answered and its clock at
	// HELLO (for the offset between local and authority time).
	SessionEpoch uint64
	ServerTime   time.Time
	GroupID      string // GroupRejected
}

// ErrSessionReplaced is returned by Run (wrapped with the AUTH_STALE_SESSION
// error) when the authority says a newer session of this agent exists.
var ErrSessionReplaced = errors.New("client: agent session replaced")

// ErrStale is returned by Send for a Command whose Config.Freshness passed
// before it could be sent: it was not sent and is out of the outbox.
var ErrStale = errors.New("client: the Command's freshness window passed before it could be sent")

// ErrNotRunning is returned by Send when Run is not active, and to waiting
// Sends when Run returns; their Commands stay in the outbox.
var ErrNotRunning = errors.New("client: not running")
