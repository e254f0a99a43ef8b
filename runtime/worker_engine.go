package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime/client"
	lc "github.com/missionweave/mwp-worker/runtime/item"
	"github.com/missionweave/mwp-worker/scheduler"
	"github.com/missionweave/mwp-worker/slots"
	"github.com/missionweave/mwp-worker/toolkeys"
)

// engine is one Run of a Worker. One goroutine (run) owns every field
// below shared; everything else (client callbacks, slot goroutines, command
// senders) posts messages to mb.
type engine struct {
	// overSince is when each Group was first seen over for this worker;
	// forgetNext when stepForget looks again (worker_forget.go).
	overSince  map[string]time.Time
	forgetNext time.Time
	ledger     *toolkeys.Ledger // its finished Missions' records are forgotten with their Group

	w      *Worker
	cfg    WorkerConfig
	log    *slog.Logger
	store  *queue.Store
	cps    *checkpoint.Store
	buf    *offline.Buffer
	client *client.Client
	send   sendFunc // client.Send, or a test's fault in front of it
	pool   *slots.Pool
	sched  *scheduler.Scheduler
	mon    *offline.Monitor
	sess   agentSession
	secret []byte
	mb     mailbox
	shared shared
	// sendCtx ends the command senders when Run returns.
	sendCtx context.Context

	items   map[itemKey]*item
	refused map[itemKey]lc.Refusal  // the offer admission control refused, and why
	clarify map[itemKey]*clarifyAsk // offers whose slow clarifiers were asked
	// freed counts commitments that ended (records forgotten); step
	// judges capacity refusals again when it moved past freedSeen.
	freed, freedSeen uint64
	rejected         map[string]time.Time // Groups refused by SUBSCRIBE: when to subscribe again
	rejections       map[string]int       // refusals in a row per Group, for the back-off
	members          map[string]uint64    // membership epoch per Group
	groups           map[string]scheduler.GroupConfig
	reliability      map[string]protocol.ReliabilityRecord
	runs             map[string]runStats // completed runs per capability id
	starts           runStats            // picks to leases
	held             []heldOutcome       // outcomes waiting for the authority
	// observedDirty: runs or starts observed since observedSaved, when
	// they were last written (worker_observe.go).
	observedDirty bool
	observedSaved time.Time
	notes         *notices // refusal notices and schedule updates

	inflight int // command sends outstanding
	draining bool
	// poolStopping: the slots' shutdown has begun (after the drain's
	// last starting item got its lease or its refusal).
	poolStopping bool
	poolDone     bool
	reconciling  bool
	connState    client.State
	fatal        error
	log_         statusLogs
}

// shared is what slot goroutines (the Host) read: the session, the
// memberships and whether the worker is online.
type shared struct {
	mu      sync.Mutex
	members map[string]uint64
	online  bool
}

func (s *shared) membership(group string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members[group]
}

func (s *shared) isOnline() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.online
}

// mailbox is an unbounded queue with a wake-up channel: posting never
// blocks, so client callbacks and slots cannot stall on the loop.
type mailbox struct {
	mu   sync.Mutex
	msgs []any
	kick chan struct{}
}

func (m *mailbox) post(v any) {
	m.mu.Lock()
	m.msgs = append(m.msgs, v)
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *mailbox) take() []any {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.msgs
	m.msgs = nil
	return out
}

// Messages to the loop.
type (
	msgApplied    struct{ res queue.Result }
	msgState      struct{ sc client.StateChange }
	msgClientDone struct{ err error }
	msgOutcome    struct{ o slots.Outcome }
	msgProgress   struct {
		key     itemKey
		leaseID string
		p       protocol.Progress
	}
	msgPublish struct {
		key     itemKey
		leaseID string
		m       protocol.ArtifactManifest
	}
	msgPoolDone struct{}
	// msgIdle: an item's last command was withheld; next forgets it.
	msgIdle       struct{ key itemKey }
	msgReconciled struct {
		logs []ReconcileLog
		err  error
	}
)

func newEngine(w *Worker, store *queue.Store, cps *checkpoint.Store, ledger *toolkeys.Ledger, buf *offline.Buffer, sess agentSession, secret []byte) (*engine, error) {
	cfg := w.cfg
	scfg := cfg.Scheduler
	scfg.Slots = int(cfg.Card.MaxConcurrency)
	if scfg.DefaultEstimate <= 0 {
		scfg.DefaultEstimate = cfg.Estimate
	}
	sched, err := scheduler.New(scfg)
	if err != nil {
		return nil, err
	}
	members := memberships(store, cfg.AgentID)
	e := &engine{
		overSince: map[string]time.Time{}, ledger: ledger,
		w: w, cfg: cfg, log: w.log, store: store, cps: cps, buf: buf, sched: sched, sess: sess, secret: secret,
		mon:   offline.NewMonitor(offline.Config{Grace: cfg.OfflineGrace}, cfg.Clock.Now()),
		mb:    mailbox{kick: make(chan struct{}, 1)},
		items: map[itemKey]*item{}, refused: map[itemKey]lc.Refusal{}, clarify: map[itemKey]*clarifyAsk{}, rejected: map[string]time.Time{}, rejections: map[string]int{}, members: members, groups: map[string]scheduler.GroupConfig{},
		reliability: map[string]protocol.ReliabilityRecord{}, runs: map[string]runStats{}, log_: newStatusLogs(w.m, &w.mu),
	}
	// A start takes at least a loop tick until one is observed.
	sched.SetStartLatency(cfg.Tick)
	if e.runs, e.starts, err = loadObserved(store.DB()); err != nil {
		return nil, err
	}
	if e.starts.n > 0 {
		sched.SetStartLatency(e.starts.mean)
	}
	e.observedSaved = cfg.Clock.Now()
	e.shared.members = maps.Clone(members)
	if e.notes, err = newNotices(store.DB(), cfg, cfg.Clock.Now()); err != nil {
		return nil, err
	}
	for _, r := range e.notes.queue {
		e.log_.notice(noticeLogOf(r)) // left pending by the last run
	}
	sched.SetOffline(true)
	ledgerFn := slots.LedgerFunc(func(ctx context.Context, op toolkeys.Op, call func(context.Context, string, uint64) ([]byte, error)) ([]byte, error) {
		r, err := ledger.Do(ctx, op, toolkeys.Call(call))
		return r.Value, err
	})
	e.pool, err = slots.New(slots.Config{
		AgentID: cfg.AgentID, Slots: scfg.Slots, Handlers: cfg.Handlers, Host: &host{e: e},
		Checkpoints: cps, Ledger: ledgerFn, Clock: cfg.Clock, WorkRoot: filepath.Join(cfg.Dir, "work"),
		PreemptTimeout: cfg.PreemptTimeout, OnRetry: e.retried,
		Logger: cfg.Logger.With("component", "handler", "agent", cfg.AgentID),
	})
	if err != nil {
		return nil, err
	}
	ccfg := cfg.Client
	ccfg.URL, ccfg.Trust, ccfg.AllowInsecureLoopback = cfg.URL, cfg.Trust, cfg.AllowInsecureLoopback
	ccfg.AgentID, ccfg.Key, ccfg.SessionEpoch, ccfg.Store = cfg.AgentID, cfg.Key, sess.epoch, store
	ccfg.AuthorityKeys, ccfg.Clock, ccfg.Logger = cfg.AuthorityKeys, cfg.Clock, cfg.Logger
	if ccfg.Freshness == 0 {
		ccfg.Freshness = commandFreshness
	}
	w.mu.Lock()
	ccfg.Groups = append(append([]string(nil), cfg.Groups...), w.added...)
	w.mu.Unlock()
	ccfg.OnApplied = func(r queue.Result) { e.mb.post(msgApplied{r}) }
	ccfg.OnState = func(sc client.StateChange) { e.mb.post(msgState{sc}) }
	if e.client, err = client.New(ccfg); err != nil {
		e.pool.Shutdown(context.Background())
		return nil, err
	}
	e.send = func(ctx context.Context, raw []byte) func() (*protocol.Receipt, error) {
		return e.client.Hand(ctx, raw).Wait
	}
	if w.sendVia != nil {
		e.send = w.sendVia(e.send)
	}
	return e, nil
}

// run is the loop: it returns after a drain (ctx ended or a fatal error).
func (e *engine) run(ctx context.Context) error {
	cctx, cancelClient := context.WithCancel(context.Background())
	var cancelSends context.CancelFunc
	e.sendCtx, cancelSends = context.WithCancel(context.Background())
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		e.mb.post(msgClientDone{e.client.Run(cctx)})
	}()
	defer func() {
		cancelSends()
		cancelClient()
		<-clientDone
	}()
	defer func() { e.saveObservations(e.cfg.Clock.Now(), true) }()
	// The mailbox is handled and the step taken under a Hold, so the
	// commands they send go to the outbox in one transaction, not in a
	// turn each.
	release := e.client.Hold()
	defer func() { release() }()
	e.syncAll()
	done := ctx.Done()
	var drainBy <-chan time.Time
	for {
		now := e.cfg.Clock.Now()
		if !e.draining && (ctx.Err() != nil || e.fatal != nil) {
			e.startDrain(e.fatal)
			done = nil
			dt := time.NewTimer(e.cfg.DrainTimeout)
			defer dt.Stop()
			drainBy = dt.C
		}
		if e.draining && e.poolDone && e.drained() {
			break
		}
		if !e.draining {
			e.step(now)
		}
		e.publishStatus()
		// A clock moved forward since now was read (a step, or a test's
		// fake clock) must not put the wake past the renewal it is for:
		// it is due at now+d, whatever the time is when it is set.
		d := e.nextWake(now)
		t := e.cfg.Clock.NewTimer(min(d, now.Add(d).Sub(e.cfg.Clock.Now())))
		release()
		select {
		case <-done:
		case <-e.mb.kick:
		case <-t.C():
		case <-drainBy:
			t.Stop()
			e.log.Warn("drain timed out", "timeout", e.cfg.DrainTimeout, "inflight", e.inflight)
			for _, it := range e.items {
				if it.Phase == phRunning {
					e.log.Warn("drain timed out: the run is stopped without its safe point", "group", it.key.group, "item", it.key.id, "lease", it.LeaseID)
				}
			}
			e.publishStatus()
			return e.exitErr()
		}
		t.Stop()
		release = e.client.Hold()
		for _, m := range e.mb.take() {
			e.handle(m)
		}
		if e.draining {
			e.maybeStopPool()
		}
	}
	e.publishStatus()
	return e.exitErr()
}

func (e *engine) exitErr() error {
	if e.fatal != nil {
		return e.fatal
	}
	return nil
}

// startDrain stops taking work and asks every slot for a safe point; the
// Preempted outcomes send their checkpoints as usual.
func (e *engine) startDrain(cause error) {
	e.draining = true
	e.log.Info("draining: stopping slots at a safe point", "cause", cause)
	for _, it := range e.items {
		// The pool's Shutdown asks each slot.
		e.preempt(it, lc.PreemptAsked{Why: "shutdown", ByPool: true}, e.cfg.Clock.Now())
	}
	e.maybeStopPool()
}

// maybeStopPool shuts the slots down once no item is starting: a start
// the authority has granted is launched and at once asked for its safe
// point, so its lease ends in a checkpoint rather than lapsing with the
// item active (or failing because the slots were gone).
func (e *engine) maybeStopPool() {
	if e.poolStopping {
		return
	}
	if e.connState != client.StateStopped && e.mon.State() == stateOnline {
		for _, it := range e.items {
			if it.Phase == phStarting {
				return
			}
		}
	}
	e.poolStopping = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DrainTimeout)
		defer cancel()
		_ = e.pool.Shutdown(ctx)
		e.mb.post(msgPoolDone{})
	}()
}

func (e *engine) handle(m any) {
	now := e.cfg.Clock.Now()
	switch m := m.(type) {
	case msgApplied:
		e.onApplied(m.res)
	case msgState:
		e.onState(m.sc, now)
	case msgClientDone:
		if m.err != nil && e.fatal == nil {
			if errors.Is(m.err, client.ErrSessionReplaced) {
				e.fatal = fmt.Errorf("runtime: worker stopped: %w", m.err)
			} else {
				e.fatal = m.err
			}
		}
		e.connState = client.StateStopped
	case msgSent:
		e.inflight--
		e.onSent(m, now)
	case msgOutcome:
		e.onOutcome(m.o, now)
	case msgProgress:
		if it := e.items[m.key]; it != nil && it.LeaseID == m.leaseID {
			p := m.p
			it.progress = &p
		}
	case msgPublish:
		e.onPublish(m)
	case msgPoolDone:
		e.poolDone = true
	case msgIdle:
		if it := e.items[m.key]; it != nil && !it.Sending {
			e.next(it)
		}
	case msgReconciled:
		e.onReconciled(m, now)
	case msgNoticeSent:
		e.onNoticeSent(m)
	case msgClarified:
		e.onClarified(m)
	}
}

// nextWake is how long the loop may sleep: until the next renewal due, at
// most one Tick (preemption, aging and grace checks).
func (e *engine) nextWake(now time.Time) time.Duration {
	d := e.cfg.Tick
	for _, it := range e.items {
		if it.Phase == phRunning && !it.Renewing {
			if w := it.RenewDue().Sub(now); w < d {
				d = w
			}
		}
		if len(it.cmds) > 0 && !it.Sending && !it.cmds[0].retryAt.IsZero() {
			d = min(d, it.cmds[0].retryAt.Sub(now))
		}
	}
	return max(d, time.Millisecond)
}

// step does what the time and state allow: renewals, offline pauses,
// starts and preemption.
func (e *engine) step(now time.Time) {
	for g, at := range e.rejected {
		if !now.Before(at) {
			delete(e.rejected, g)
			e.client.AddGroup(g)
		}
	}
	e.tick(now)
	e.retryDue(now)
	// Supervision also runs on the pool's own ticker; here it sees every
	// instant the loop sees (after the grace extensions of tick), so lease
	// expiry and the hard timeout of a lost lease act in step.
	e.pool.Tick()
	if e.freed != e.freedSeen {
		e.freedSeen = e.freed
		e.rejudgeCapacity()
	}
	e.schedule(now)
	e.stepNotices(now)
	e.saveObservations(now, false)
	e.stepForget(now)
}

// drained reports that nothing more can go out: every command answered,
// or no way to send (offline: checkpoints are in the durable buffer and the
// rest would only wait for a reconnect; or the connection is gone).
func (e *engine) drained() bool {
	if e.connState == client.StateStopped || e.mon.State() != stateOnline {
		return true
	}
	return e.inflight == 0 && e.queuedCommands() == 0
}

func (e *engine) queuedCommands() int {
	n := 0
	for _, it := range e.items {
		if m := e.members[it.key.group]; m == 0 || m == it.StaleMembership { // lc.Due waits for the view
			continue // cannot go out before the view has a membership epoch
		}
		n += len(it.cmds)
	}
	return n
}
