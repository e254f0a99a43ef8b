package runtime

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime/client"
	"github.com/missionweave/mwp-worker/toolkeys"
)

// Worker is the worker process (docs/design.md §3): the connection, the durable
// queue, the global scheduler, the execution slots, lease renewal, offline
// buffering and reconciliation, wired together (see doc.go "The Worker").
type Worker struct {
	cfg WorkerConfig
	log *slog.Logger

	mu      sync.Mutex
	running bool
	eng     *engine // while Run is active
	status  WorkerStatus
	added   []string
	m       *metrics
	store   *queue.Store // while Run is active, for the metrics' gauges
	offAt   time.Time    // when the worker went offline; zero while online
	// attempts is the attempt running by lease id after a retry: set
	// from a run's goroutine, read when status is published.
	attempts map[string]uint64
	// sendVia, set by tests before Run, wraps the command sender: faults
	// between the worker and its authority.
	sendVia func(sendFunc) sendFunc
}

// NewWorker checks cfg; Run starts the worker.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, log: cfg.Logger.With("component", "runtime.worker", "agent", cfg.AgentID), m: newMetrics()}
	w.status = WorkerStatus{AgentID: cfg.AgentID, Slots: int(cfg.Card.MaxConcurrency), Connection: client.StateIdle.String()}
	return w, nil
}

func (w *Worker) liveStore() *queue.Store {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.store
}

func (w *Worker) offlineSince() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.offAt
}

func (w *Worker) setOffline(at time.Time) {
	w.mu.Lock()
	w.offAt = at
	w.mu.Unlock()
}

// AddGroup subscribes a Group, now when running, else at the next Run.
func (w *Worker) AddGroup(groupID string) {
	w.mu.Lock()
	if !slices.Contains(w.added, groupID) {
		w.added = append(w.added, groupID)
	}
	eng := w.eng
	w.mu.Unlock()
	if eng != nil {
		eng.client.AddGroup(groupID)
	}
}

// forgetAdded drops a forgotten Group from those AddGroup named: it is
// not subscribed again, and the list holds the Groups that are active.
func (w *Worker) forgetAdded(groupID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.added = slices.DeleteFunc(w.added, func(g string) bool { return g == groupID })
}

// Redeliver has the authority send a Group's events after `after` again
// (see client.Client.Redeliver); a no-op while the worker is not running.
func (w *Worker) Redeliver(groupID string, after uint64) {
	w.mu.Lock()
	eng := w.eng
	w.mu.Unlock()
	if eng != nil {
		eng.client.Redeliver(groupID, after)
	}
}

// Status returns a snapshot of the worker's state, also after Run returned.
func (w *Worker) Status() WorkerStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return cloneStatus(w.status)
}

// Run opens the store, registers the Agent Card and opens the next session
// (spec 11.3), then works until ctx ends: it stops taking work, asks every
// running slot to reach a safe point, sends their checkpoints and returns
// nil. A replaced session (AUTH_STALE_SESSION) stops the slots at a safe
// point and returns an error wrapping client.ErrSessionReplaced.
func (w *Worker) Run(ctx context.Context) (err error) {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("runtime: Worker.Run is already active")
	}
	w.running = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running, w.eng, w.store = false, nil, nil
		if err != nil {
			w.status.LastError = err.Error()
		}
		w.status.Connection = client.StateStopped.String()
		w.mu.Unlock()
	}()

	cfg := w.cfg
	store, err := queue.Open(cfg.Dir, queue.Options{Clock: cfg.Clock, NoSync: cfg.NoSync, LiveStatus: func() any { return w.Status() }})
	if err != nil {
		return err
	}
	defer store.Close()
	cps, err := checkpoint.Open(store.DB(), filepath.Join(cfg.Dir, "checkpoints"))
	if err != nil {
		return err
	}
	ledger, err := toolkeys.OpenLedger(store.DB())
	if err != nil {
		return err
	}
	buf, err := offline.OpenBuffer(store.DB(), cfg.OfflineLimits)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "work"), 0o700); err != nil {
		return err
	}
	sess, err := w.openSession(ctx, store)
	if err != nil {
		return err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	eng, err := newEngine(w, store, cps, ledger, buf, sess, secret)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.eng, w.store = eng, store
	w.status.SessionEpoch = sess.epoch
	w.mu.Unlock()
	return eng.run(ctx)
}

// agentSession is what the bootstrap established.
type agentSession struct {
	epoch    uint64
	card     protocol.AgentCard // signed
	cardHash string
}

// openSession connects under the last known session epoch, registers the
// card and opens the next session. The epoch is read from Dir/session.json
// and corrected from the authority's AUTH_STALE_SESSION answer, whose
// details carry the current one; the new epoch is written back.
func (w *Worker) openSession(ctx context.Context, store *queue.Store) (agentSession, error) {
	cfg := w.cfg
	epoch, err := loadEpoch(cfg.Dir)
	if err != nil {
		return agentSession{}, err
	}
	if err := w.purgeOutbox(store, epoch); err != nil {
		return agentSession{}, err
	}
	enrolled := false
	for range 8 {
		card := cfg.Card
		card.AgentID = cfg.AgentID
		card.Keys = protocol.List[protocol.PublicKey]{cfg.Key.Public().Encode()}
		card.IssuedAt = protocol.NewTime(cfg.Clock.Now())
		signed, err := protocol.SignedCard(card, cfg.Key)
		if err != nil {
			return agentSession{}, err
		}
		raw, err := protocol.Marshal(signed)
		if err != nil {
			return agentSession{}, err
		}
		s := agentSession{epoch: epoch + 1, card: signed, cardHash: protocol.Digest(raw)}
		_, register, err := protocol.BuildCommand(w.actor(), cfg.Key, protocol.CmdAgentCardRegister, protocol.Envelope{},
			&protocol.RegisterAgentCardPayload{AgentCard: signed}, cfg.Clock.Now())
		if err != nil {
			return agentSession{}, err
		}
		if !enrolled && epoch == 0 && cfg.Enroll != nil {
			// A first start on an authority that can enroll in process:
			// register before HELLO, which an unknown agent's would fail
			// (and log as a disconnection) on every fresh `up`.
			if err := cfg.Enroll(ctx, register); err == nil {
				enrolled = true
			} else {
				w.log.Debug("early enrollment failed; trying HELLO first", "err", err)
			}
		}
		err = w.bootstrap(ctx, store, epoch, register, s)
		var pe *protocol.Error
		switch {
		case err == nil:
			if err := saveEpoch(cfg.Dir, s.epoch); err != nil {
				return agentSession{}, err
			}
			if err := w.purgeOutbox(store, s.epoch); err != nil {
				return agentSession{}, err
			}
			w.log.Info("session opened", "sessionEpoch", s.epoch)
			return s, nil
		case ctx.Err() != nil:
			return agentSession{}, ctx.Err()
		case errors.As(err, &pe) && pe.Code == protocol.CodeAuthStaleSession:
			cur, ok := detailUint(pe.Details, "sessionEpoch")
			if !ok {
				// A resent command of an older session was refused (the
				// Client drops it): try again under the same epoch.
				w.log.Info("a stale command was refused during the session bootstrap", "err", err)
				continue
			}
			w.log.Info("session epoch corrected by the authority", "from", epoch, "to", cur)
			epoch = cur
		case errors.As(err, &pe) && pe.Code == protocol.CodeAuthInvalidSignature && !enrolled:
			if cfg.Enroll == nil {
				return agentSession{}, fmt.Errorf("%w: %w", ErrNotRegistered, err)
			}
			if err := cfg.Enroll(ctx, register); err != nil {
				return agentSession{}, fmt.Errorf("runtime: enroll %s: %w", cfg.AgentID, err)
			}
			enrolled = true
		default:
			return agentSession{}, err
		}
	}
	return agentSession{}, errors.New("runtime: could not open a session: the session epoch keeps moving")
}

// bootstrap runs one Client under epoch until it is connected, then sends
// the card registration and session_open for s.epoch. HELLO errors that
// decide the next step (stale session, unknown agent) are returned.
func (w *Worker) bootstrap(ctx context.Context, store *queue.Store, epoch uint64, register []byte, s agentSession) error {
	cfg := w.cfg
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	states := make(chan client.StateChange, 16)
	ccfg := cfg.Client
	ccfg.URL, ccfg.Trust, ccfg.AllowInsecureLoopback = cfg.URL, cfg.Trust, cfg.AllowInsecureLoopback
	ccfg.AgentID, ccfg.Key, ccfg.SessionEpoch, ccfg.Store = cfg.AgentID, cfg.Key, epoch, store
	ccfg.AuthorityKeys, ccfg.Clock, ccfg.Logger = cfg.AuthorityKeys, cfg.Clock, cfg.Logger
	ccfg.Groups, ccfg.OnApplied, ccfg.IgnoreListed = nil, nil, true
	if ccfg.Freshness == 0 {
		ccfg.Freshness = commandFreshness // a previous run's outbox is never sent stale
	}
	ccfg.OnState = func(sc client.StateChange) {
		select {
		case states <- sc:
		default:
		}
	}
	c, err := client.New(ccfg)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(cctx) }()
	defer func() {
		cancel()
		<-done
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-done:
			done <- err // for the deferred wait
			if err == nil {
				err = errors.New("runtime: the connection stopped during the session bootstrap")
			}
			return err
		case sc := <-states:
			var pe *protocol.Error
			if sc.State == client.StateDisconnected && errors.As(sc.Err, &pe) && pe.Code == protocol.CodeAuthInvalidSignature {
				return pe
			}
			if sc.State != client.StateConnected {
				continue
			}
			// Commands a previous run left unanswered are resent first;
			// they are valid only while their session is current, so they
			// settle before session_open replaces it.
			w.awaitOutbox(ctx, store)
			if _, err := c.Send(ctx, register); err != nil {
				return fmt.Errorf("runtime: agent_card_register: %w", err)
			}
			_, open, err := protocol.BuildCommand(w.actor(), cfg.Key, protocol.CmdSessionOpen, protocol.Envelope{},
				&protocol.OpenSessionPayload{AgentID: cfg.AgentID, SessionEpoch: s.epoch, AgentCardHash: s.cardHash}, cfg.Clock.Now())
			if err != nil {
				return err
			}
			if _, err := c.Send(ctx, open); err != nil {
				return err
			}
			return nil
		}
	}
}

// awaitOutbox waits, bounded, until the store's outbox is empty.
func (w *Worker) awaitOutbox(ctx context.Context, store *queue.Store) {
	deadline := time.Now().Add(outboxSettle)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		empty := true
		for range store.Outbox() {
			empty = false
			break
		}
		if empty {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// outboxSettle bounds the wait for a previous run's commands at start.
const outboxSettle = 5 * time.Second

// purgeOutbox drops commands signed under an older session: the authority
// would answer AUTH_STALE_SESSION, which the Client takes for a replaced
// session. Their effect, if any, is lost with that session (its leases
// were revoked by session_open).
func (w *Worker) purgeOutbox(store *queue.Store, epoch uint64) error {
	var stale []queue.OutboxEntry
	for e, err := range store.Outbox() {
		if err != nil {
			return err
		}
		var c struct {
			SessionEpoch *uint64 `json:"sessionEpoch"`
		}
		if json.Unmarshal(e.Signed, &c) == nil && c.SessionEpoch != nil && *c.SessionEpoch < epoch {
			stale = append(stale, e)
		}
	}
	for _, e := range stale {
		w.log.Warn("dropping a command of an earlier session", "action", e.ActionID, "type", e.Type)
		if err := store.AckOutbox(e.ActionID); err != nil {
			return err
		}
	}
	return nil
}

func (w *Worker) actor() protocol.Actor {
	return protocol.Actor{Kind: protocol.ActorAgent, ID: w.cfg.AgentID}
}

// detailUint reads a non-negative integer from error details, whatever
// number type the decoder produced.
func detailUint(d map[string]any, k string) (uint64, bool) {
	switch v := d[k].(type) {
	case uint64:
		return v, true
	case int64:
		if v >= 0 {
			return uint64(v), true
		}
	case int:
		if v >= 0 {
			return uint64(v), true
		}
	case float64:
		if v >= 0 && v <= 1<<53 && v == float64(uint64(v)) {
			return uint64(v), true
		}
	case interface{ Int64() (int64, error) }:
		if n, err := v.Int64(); err == nil && n >= 0 {
			return uint64(n), true
		}
	}
	return 0, false
}
