package runtime

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime/client"
	"github.com/missionweave/mwp-worker/scheduler"
	"github.com/missionweave/mwp-worker/slots"
)

// WorkerConfig configures a Worker. Dir, Key, AgentID, URL, Card and at
// least one Handler are required.
type WorkerConfig struct {
	// Dir holds the worker's store (queue.Open(Dir)), its checkpoint blobs,
	// published artifact bytes, handler work directories and session.json
	// (the last session epoch).
	Dir     string
	Key     protocol.PrivateKey
	AgentID string
	// Card is the Agent Card registered at every start (agentId, keys,
	// issuedAt and the signature are filled in); MaxConcurrency is the
	// number of slots (default: the number of Handlers, at least 1).
	Card protocol.AgentCard

	URL                   string
	Trust                 client.Trust
	AllowInsecureLoopback bool
	// AuthorityKeys verifies every event; nil skips the check (see
	// client.Config.AuthorityKeys).
	AuthorityKeys protocol.KeyResolver

	// Groups to subscribe at start besides those the store knows.
	Groups   []string
	Handlers []slots.Handler

	// Enroll registers the agent out of band when the authority does not
	// know it (HELLO refused as unregistered): the wss binding has no way
	// for an unknown agent to authenticate. It receives the signed
	// agent_card_register command. UseInProcess sets it to the embedded
	// authority's; nil makes Run fail with ErrNotRegistered.
	Enroll func(ctx context.Context, signedRegister []byte) error
	// Artifacts stores a published artifact's bytes and returns its URI;
	// ctx is the handler's (it ends with the run). Its error reaches the
	// handler as Work.Publish's: one that may be asked again unchanged
	// (an authority unreachable for the offline grace) is a retryable
	// *protocol.Error. nil keeps the bytes under Dir/artifacts (a file://
	// URI) and does not send artifact.publish, since the binding cannot
	// upload the content and the authority refuses a manifest whose
	// content it lacks.
	Artifacts func(ctx context.Context, data []byte) (uri string, publish bool, err error)
	// Extensions are the extension profile URIs this worker's handlers
	// interpret (spec 18): an offer that depends on another critical one
	// is refused (admission reason capability).
	Extensions []string
	// Classification is the least data classification of the artifacts
	// this worker publishes (spec 13.1): a handler may name a more
	// restricted one, never a less restricted one (default internal).
	Classification protocol.Classification
	// FetchArtifact reads bytes from the authority's store for a handler's
	// fetch of an input artifact the worker does not keep itself
	// (slots.Work.FetchArtifact checks the hash); ctx is the handler's,
	// and its error reaches the handler as Artifacts' does. nil: only this
	// worker's own Dir/artifacts are read.
	FetchArtifact func(ctx context.Context, digest string) ([]byte, error)

	Clock  clock.Timers // nil: clock.Real
	Logger *slog.Logger
	// OnRetry, when set, is told of every failed attempt the retry policy
	// runs again (after the WARN line), from the run's goroutine: `up`
	// prints it, as the authority's log never shows a retry.
	OnRetry func(slots.Retry)

	// GroupWeights and GroupQuotas set the scheduler's share per Group;
	// absent Groups get weight 1, the Mission's priority class and no quota.
	GroupWeights map[string]int64
	GroupQuotas  map[string]int
	Scheduler    scheduler.Config // Slots is set from the card

	// QueueDepth bounds the committed (accepted, unfinished) items per slot
	// admission control takes (default 4).
	QueueDepth int
	// Estimate is the expected run time of an item for admission and
	// disclosure when the scheduler has none (default 1 minute).
	Estimate time.Duration
	// Costs is the expected cost of one run per capability id in the
	// budget dimensions other than wall-clock (which is Estimate's and the
	// observed runs'); an item's is the sum over its required
	// capabilities, an absent dimension 0. Limits caps what the accepted,
	// unfinished items hold at once, per dimension; absent: no cap.
	// Admission refuses an offer whose contract budget does not cover its
	// expected cost, or that would take the worker past a limit (spec 10.3).
	Costs  map[string]protocol.Budgets
	Limits protocol.Budgets

	// OfflineGrace and OfflineLimits bound offline execution (package
	// offline); zero values take its defaults.
	OfflineGrace  time.Duration
	OfflineLimits offline.Limits

	// DisclosureThreshold is the least move of an accepted item's
	// estimated start or completion posted as a schedule update (spec
	// 11.2; see MaterialChange), and the least time between two
	// publications for one item (default 1 minute).
	DisclosureThreshold time.Duration
	// NoticeBurst and NoticeEvery bound the worker's own messages (refusal
	// notices and schedule updates): NoticeBurst at once, then one every
	// NoticeEvery (default 10 and 6s, a sixth of authority-lite's default
	// message rate). A negative NoticeBurst posts none.
	NoticeBurst int
	NoticeEvery time.Duration

	// ForgetGrace is how long a Group whose Mission is terminal and which
	// holds nothing of this worker stays before it is forgotten: its
	// buckets dropped, a tombstone kept, no longer subscribed (default
	// DefaultForgetGrace; negative: never).
	ForgetGrace time.Duration

	// Tick paces preemption, aging and grace checks (default 1s of Clock).
	Tick time.Duration
	// DrainTimeout bounds a shutdown: slots reaching their safe points and
	// their checkpoints being sent (default 30s, real time).
	DrainTimeout time.Duration
	// PreemptTimeout is how long a run asked to yield for another item may
	// take to reach a safe point (default slots.DefaultPreemptTimeout).
	// Past it the run is not interrupted (spec 11.3): it keeps its slot,
	// the preemption is recorded as refused (WARN log, Status) and the
	// waiting item takes the next slot that frees. It is also the hard
	// timeout of a lost lease (slots.Config).
	PreemptTimeout time.Duration

	// Client tunes the connection; its URL, identity, store, clock and
	// callbacks are set by the Worker.
	Client client.Config

	// NoSync opens the store without fsync (queue.Options.NoSync): load
	// generators measuring the cost of durability only; a crash may lose
	// or corrupt the store.
	NoSync bool
}

// InProcessAuthority is an authority running in the worker's own process
// (authority-lite/embed.Authority). An interface, so that runtime never
// imports the authority it talks to (docs/design.md §2).
type InProcessAuthority interface {
	// Endpoint is the wss URL and the "sha256:" pin of its certificate.
	Endpoint() (url, pin string)
	Keys() protocol.KeyResolver // verifies its events
	Enroll(ctx context.Context, signedRegister []byte) error
	Artifacts(data []byte) (uri string, publish bool, err error)
	// ReadArtifact returns stored bytes that agentID may read (a member
	// of a Group where they are published).
	ReadArtifact(ctx context.Context, agentID, digest string) ([]byte, error)
}

// UseInProcess points the worker at a: its URL with the certificate
// pinned, its event keys, enrollment and artifact store (both ways). Set
// AgentID first. The worker still
// talks to it over wss, the same path as to a remote authority.
func (c *WorkerConfig) UseInProcess(a InProcessAuthority) {
	url, pin := a.Endpoint()
	c.URL, c.Trust, c.AuthorityKeys = url, client.Trust{Pin: pin}, a.Keys()
	c.Enroll = a.Enroll
	c.Artifacts = func(_ context.Context, data []byte) (string, bool, error) { return a.Artifacts(data) }
	c.FetchArtifact = func(ctx context.Context, digest string) ([]byte, error) {
		return a.ReadArtifact(ctx, c.AgentID, digest)
	}
	// A Group compacted past the worker's cursor is restored from the
	// snapshot CURSOR_TOO_OLD names, read from the authority's store.
	if s, ok := a.(interface {
		Snapshot(ref protocol.SnapshotRef) ([]byte, error)
	}); ok {
		c.Client.FetchSnapshot = func(_ context.Context, ref protocol.SnapshotRef) ([]byte, error) { return s.Snapshot(ref) }
	}
}

// ErrNotRegistered is returned by Run when the authority does not know the
// agent and WorkerConfig.Enroll is nil.
var ErrNotRegistered = errors.New("runtime: the authority does not know this agent; enroll its Agent Card first")

// defaultCard fills what the Agent Card leaves out from the handlers and
// the agent id.
func (c *WorkerConfig) defaultCard() {
	if c.Card.MaxConcurrency == 0 {
		c.Card.MaxConcurrency = uint64(max(1, len(c.Handlers)))
	}
	if len(c.Card.Capabilities) == 0 {
		for _, h := range c.Handlers {
			c.Card.Capabilities = append(c.Card.Capabilities, h.Capability())
		}
	}
	if len(c.Card.Roles) == 0 {
		c.Card.Roles = protocol.List[protocol.Role]{protocol.RoleWorker}
	}
	if c.Card.AgentVersion == "" {
		c.Card.AgentVersion = "0.1.0"
	}
	if c.Card.OrganizationID == "" {
		c.Card.OrganizationID = "org-1"
	}
	if c.Card.DisplayName == "" {
		c.Card.DisplayName = c.AgentID
	}
}

func (c *WorkerConfig) check() error {
	switch {
	case c.Dir == "":
		return errors.New("runtime: WorkerConfig.Dir is required")
	case c.AgentID == "":
		return errors.New("runtime: WorkerConfig.AgentID is required")
	case c.URL == "":
		return errors.New("runtime: WorkerConfig.URL is required")
	case len(c.Handlers) == 0:
		return errors.New("runtime: at least one handler is required")
	case !protocol.KeyBelongsTo(c.Key.KeyID, protocol.ActorAgent, c.AgentID):
		return errors.New("runtime: WorkerConfig.Key is not a key of agent " + c.AgentID)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.defaultCard()
	switch {
	case c.Classification == "":
		c.Classification = protocol.ClassInternal
	case c.Classification.Rank() == 0:
		return errors.New("runtime: WorkerConfig.Classification " + string(c.Classification) + " is not public, internal, confidential or restricted")
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = 4
	}
	if c.Estimate <= 0 {
		c.Estimate = time.Minute
	}
	if c.DisclosureThreshold <= 0 {
		c.DisclosureThreshold = time.Minute
	}
	if c.NoticeBurst == 0 {
		c.NoticeBurst = 10
	}
	if c.NoticeEvery <= 0 {
		c.NoticeEvery = 6 * time.Second
	}
	if c.Tick <= 0 {
		c.Tick = time.Second
	}
	if c.ForgetGrace == 0 {
		c.ForgetGrace = DefaultForgetGrace
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.PreemptTimeout <= 0 {
		c.PreemptTimeout = slots.DefaultPreemptTimeout
	}
	return nil
}

// WorkerStatus is a snapshot of a running Worker, for tests, `inspect`-like
// tools and the PoC report.
type WorkerStatus struct {
	AgentID      string          `json:"agentId"`
	SessionEpoch uint64          `json:"sessionEpoch"`
	Connection   string          `json:"connection"` // the Client's State
	Offline      string          `json:"offline"`    // offline.Monitor state
	Slots        int             `json:"slots"`      // maxConcurrency
	FreeSlots    int             `json:"freeSlots"`  //
	Queued       int             `json:"queued"`     // in the scheduler, waiting
	Running      []RunStatus     `json:"running"`
	Buffered     int             `json:"buffered"` // offline buffer entries
	Groups       []GroupStatus   `json:"groups"`
	Admissions   []AdmissionLog  `json:"admissions"`
	Selections   []SelectionLog  `json:"selections"`
	Preemptions  []PreemptionLog `json:"preemptions"`
	Outcomes     []OutcomeLog    `json:"outcomes"`
	Reconciled   []ReconcileLog  `json:"reconciled,omitempty"`
	Notices      []NoticeLog     `json:"notices,omitempty"`
	LastError    string          `json:"lastError,omitempty"`
}

// RunStatus is one occupied slot.
type RunStatus struct {
	GroupID        string    `json:"groupId"`
	WorkItemID     string    `json:"workItemId"`
	Slot           int       `json:"slot"`
	LeaseID        string    `json:"leaseId"`
	LeaseExpiresAt time.Time `json:"leaseExpiresAt"`
	Renewals       int       `json:"renewals"`
	// Attempt is the attempt running now, 1-based across the item's
	// acceptances: above 1 after a failed attempt the retry policy runs
	// again inside this lease.
	Attempt uint64 `json:"attempt"`
}

// GroupStatus is one Group's queue as the worker sees it.
type GroupStatus struct {
	GroupID string `json:"groupId"`
	Cursor  uint64 `json:"cursor"`
	Items   int    `json:"items"` // WorkItems offered to or owned by this worker
	// PriorityClass is the Group's Mission priority, which scales its
	// scheduler weight.
	PriorityClass protocol.PriorityClass `json:"priorityClass,omitempty"`
	// Diverged is set when the authority's log contradicts the Group's
	// history in the store: nothing more of it applies until resync.
	Diverged *queue.Divergence `json:"diverged,omitempty"`
}

// AdmissionLog records one admission decision with its selection basis.
type AdmissionLog struct {
	GroupID    string `json:"groupId"`
	WorkItemID string `json:"workItemId"`
	OfferID    string `json:"offerId"`
	// Renewal marks the judgement of a revised contract of an item this
	// worker owns (spec 10.1), ContractRevision the revision judged.
	Renewal          bool                         `json:"renewal,omitempty"`
	ContractRevision uint64                       `json:"contractRevision,omitempty"`
	Accepted         bool                         `json:"accepted"`
	Rejection        *protocol.AdmissionRejection `json:"rejection,omitempty"`
	Basis            protocol.SelectionBasis      `json:"basis"`
	// Err is the authority's answer when the acceptance was refused
	// (another candidate won, the offer expired).
	Err string    `json:"error,omitempty"`
	At  time.Time `json:"at"`
}

// SelectionLog records one scheduler pick.
type SelectionLog struct {
	GroupID    string                   `json:"groupId"`
	WorkItemID string                   `json:"workItemId"`
	Basis      scheduler.SelectionBasis `json:"basis"`
	At         time.Time                `json:"at"`
}

// PreemptionLog records one cooperative preemption request.
type PreemptionLog struct {
	GroupID    string                   `json:"groupId"`
	WorkItemID string                   `json:"workItemId"` // the victim
	For        string                   `json:"for"`        // the item that could not start
	Reason     string                   `json:"reason"`     // scheduler, offline-buffer-full, grace, shutdown
	Basis      scheduler.SelectionBasis `json:"basis"`
	At         time.Time                `json:"at"`
	// RefusedAt is set when the run did not reach a safe point within
	// PreemptTimeout and kept its slot (spec 11.3).
	RefusedAt *time.Time `json:"refusedAt,omitempty"`
}

// OutcomeLog records how a run ended and what was sent for it.
type OutcomeLog struct {
	GroupID    string `json:"groupId"`
	WorkItemID string `json:"workItemId"`
	LeaseID    string `json:"leaseId"`
	Kind       string `json:"kind"`
	Sent       string `json:"sent,omitempty"` // the command type
	Err        string `json:"error,omitempty"`
	// Decision is what the worker did about a refused submission:
	// failed (work.fail sent with the refusal), lease lost, moved on.
	Decision   string    `json:"decision,omitempty"`
	Checkpoint string    `json:"checkpoint,omitempty"`
	At         time.Time `json:"at"`
}

// NoticeLog records one message the worker posted, or decided to post, to
// a Group about its own decisions: a refused offer or a schedule update.
type NoticeLog struct {
	Kind       string `json:"kind"` // admission.rejection, schedule.disclosure
	GroupID    string `json:"groupId"`
	WorkItemID string `json:"workItemId"`
	OfferID    string `json:"offerId,omitempty"`
	MessageID  string `json:"messageId"`
	// State is pending, posted, dropped (refused by the authority, never
	// retried) or skipped (the offer was judged again and its notice
	// already decided).
	State string    `json:"state"`
	Why   string    `json:"why,omitempty"` // what changed, for an update
	Err   string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// ReconcileLog records one buffered command settled after a reconnect.
type ReconcileLog struct {
	ActionID string `json:"actionId"`
	Type     string `json:"type"`
	Outcome  string `json:"outcome"`
	Err      string `json:"error,omitempty"`
}
