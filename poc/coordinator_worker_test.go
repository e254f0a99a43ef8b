package poc

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// testWorker plays a worker agent in-process without the runtime: it
// follows its Groups' logs, accepts offers made to it, starts what it won,
// runs the real handlers in a real slots.Pool, and sends progress
// (lease.renew), artifacts, checkpoints and results as signed commands of
// its own Principal.
type testWorker struct {
	t    testing.TB
	id   string
	svc  *authoritylite.Service
	p    *authoritylite.Principal
	key  protocol.PrivateKey
	pool *slots.Pool
	clk  clock.Clock

	mu      sync.Mutex
	runs    map[string]slots.Assignment // by lease id
	stalled map[string]bool             // work items whose results it holds back (lease-expiry)
	held    chan slots.Outcome          // the held-back outcomes
	errs    []error
	// waiting are won items not started yet (every slot was busy), in the
	// order they were won; drain starts them as slots free.
	waiting [][2]string
	drainMu sync.Mutex
}

func newTestWorker(t testing.TB, svc *authoritylite.Service, id string, caps []protocol.Capability, nslots int, hc HandlerConfig) *testWorker {
	t.Helper()
	key := mustKey(t, protocol.ActorAgent, id)
	w := &testWorker{t: t, id: id, svc: svc, key: key, p: svc.Principal(agent(id), key), clk: clock.Real{},
		runs: map[string]slots.Assignment{}, stalled: map[string]bool{}, held: make(chan slots.Outcome, 4)}
	if err := w.p.Join(context.Background(), AgentCard(id, caps, nslots)); err != nil {
		t.Fatalf("join %s: %v", id, err)
	}
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "worker.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(db, filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	hc.AgentID, hc.Artifacts = id, svc
	pool, err := slots.New(slots.Config{AgentID: id, Slots: nslots, Handlers: Handlers(hc), Host: w, Checkpoints: store, WorkRoot: dir, TickInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	w.pool = pool
	t.Cleanup(func() {
		pool.Shutdown(context.Background())
		db.Close()
	})
	return w
}

func agent(id string) protocol.Actor { return protocol.Actor{Kind: protocol.ActorAgent, ID: id} }

// follow handles the Group's events until ctx ends.
func (w *testWorker) follow(ctx context.Context, group string) {
	var after uint64
	for {
		changed := w.svc.Changed(group, after)
		evs, err := w.svc.Events(group, after, 0)
		if err != nil {
			w.fail(err)
			return
		}
		for _, se := range evs {
			after = se.Sequence
			var ev protocol.Event
			if err := json.Unmarshal(se.Raw, &ev); err != nil {
				w.fail(err)
				return
			}
			w.handle(ctx, &ev)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

func (w *testWorker) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

func (w *testWorker) handle(ctx context.Context, ev *protocol.Event) {
	payload, err := group.Decode(ev.Type, ev.Payload)
	if ev.Aggregate == nil || ev.Aggregate.Kind != protocol.AggregateWorkItem || err != nil {
		return
	}
	switch p := payload.(type) {
	case *group.OfferCreated:
		if !slices.ContainsFunc(p.Candidates, func(c protocol.OfferCandidate) bool { return c.AgentID == w.id }) {
			return
		}
		if cur, ok := w.svc.WorkItem(ev.GroupID, p.WorkItemID); !ok || cur.Offer == nil || cur.Offer.OfferID != p.OfferID {
			return // replayed: the offer is gone
		}
		now := w.svc.Now()
		// A refusal (another candidate won) is the protocol working.
		_, _ = w.p.Do(ctx, protocol.CmdWorkAcceptOffer, ev.GroupID, &protocol.AcceptOfferPayload{WorkItemID: p.WorkItemID, OfferID: p.OfferID,
			ContractRevision: p.ContractRevision, ScheduleDisclosure: protocol.ScheduleDisclosure{
				EstimatedStartWindow: protocol.TimeWindow{From: protocol.NewTime(now), To: protocol.NewTime(now.Add(time.Minute))},
				EstimatedCompletion:  protocol.NewTime(now.Add(10 * time.Minute)), Confidence: 0.7, CapacityState: protocol.CapacityAvailable,
				ComputedAt: protocol.NewTime(now)}})
	case *group.OfferAccepted:
		if p.Ownership == nil || p.Ownership.OwnerAgentID != w.id || p.RenewedAcceptance {
			return
		}
		w.mu.Lock()
		w.waiting = append(w.waiting, [2]string{ev.GroupID, p.WorkItemID})
		w.mu.Unlock()
		w.drain(ctx)
	}
}

// drain starts won items, oldest first, while a slot is free; an item that
// is no longer queued under this worker's ownership is dropped.
func (w *testWorker) drain(ctx context.Context) {
	w.drainMu.Lock()
	defer w.drainMu.Unlock()
	for w.pool.Free() > 0 {
		w.mu.Lock()
		if len(w.waiting) == 0 {
			w.mu.Unlock()
			return
		}
		next := w.waiting[0]
		w.waiting = w.waiting[1:]
		w.mu.Unlock()
		cur, ok := w.svc.WorkItem(next[0], next[1])
		if !ok || cur.State != protocol.WorkQueued || cur.Ownership == nil || cur.Ownership.OwnerAgentID != w.id {
			continue
		}
		w.start(ctx, next[0], cur)
	}
}

func (w *testWorker) start(ctx context.Context, group string, cur group.WorkItem) {
	sp := &protocol.StartWorkPayload{WorkItemID: cur.WorkItemID, OwnershipEpoch: cur.Ownership.OwnershipEpoch}
	if cur.Checkpoint != nil {
		sp.ResumeFromCheckpointID = cur.Checkpoint.CheckpointID
	}
	if _, err := w.p.Do(ctx, protocol.CmdWorkStart, group, sp); err != nil {
		w.fail(err)
		return
	}
	item, _ := w.svc.WorkItem(group, cur.WorkItemID)
	a := slots.Assignment{GroupID: group, MissionID: item.MissionID, WorkItemID: item.WorkItemID, OwnershipEpoch: item.Ownership.OwnershipEpoch,
		LeaseID: item.Lease.LeaseID, LeaseExpiresAt: item.Lease.ExpiresAt.Time, Contract: item.Contract, PriorAttempts: item.Attempts - 1}
	w.mu.Lock()
	w.runs[a.LeaseID] = a
	w.mu.Unlock()
	if _, err := w.pool.Start(a); err != nil {
		w.fail(err)
	}
}

func (w *testWorker) assignment(s slots.Slot) slots.Assignment {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runs[s.LeaseID]
}

// Progress renews the execution lease with the report (work.progressed).
func (w *testWorker) Progress(ctx context.Context, s slots.Slot, p protocol.Progress) error {
	_, err := w.p.Do(ctx, protocol.CmdLeaseRenew, s.GroupID, &protocol.RenewLeasePayload{WorkItemID: s.WorkItemID, OwnershipEpoch: s.OwnershipEpoch, LeaseID: s.LeaseID, Progress: p})
	if err != nil {
		return err
	}
	if item, ok := w.svc.WorkItem(s.GroupID, s.WorkItemID); ok && item.Lease != nil && item.Lease.LeaseID == s.LeaseID {
		return w.pool.RenewLease(s.Index, s.LeaseID, item.Lease.ExpiresAt.Time)
	}
	return nil
}

func (w *testWorker) Checkpointed(context.Context, slots.Slot, checkpoint.Checkpoint) error {
	return nil
}

// PublishArtifact stores the bytes and publishes their manifest, whose
// provenance is the item's contract inputs.
func (w *testWorker) PublishArtifact(ctx context.Context, s slots.Slot, art slots.Artifact) (string, error) {
	mediaType, data := art.MediaType, art.Data
	d, err := w.svc.PutArtifact(data)
	if err != nil {
		return "", err
	}
	a := w.assignment(s)
	var sources []string
	for _, in := range a.Contract.Inputs {
		sources = append(sources, in.Artifact)
	}
	m, err := SignManifest(w.svc, w.key, w.id, ManifestFields{MediaType: mediaType, MissionID: s.MissionID, GroupID: s.GroupID, WorkItemID: s.WorkItemID,
		Sources: sources, Tools: map[string]string{"mwp-poc-handlers": HandlerVersion}, Data: data, At: w.svc.Now()})
	if err != nil {
		return "", err
	}
	_, err = w.p.Do(ctx, protocol.CmdArtifactPublish, s.GroupID, &protocol.PublishArtifactPayload{Manifest: m, OwnershipEpoch: protocol.Uint64(s.OwnershipEpoch), LeaseID: s.LeaseID})
	return d, err
}

func (w *testWorker) Allow(context.Context, slots.Slot, slots.Risk) error { return nil }

func (w *testWorker) Remaining(context.Context, slots.Slot) (protocol.Budgets, error) {
	return protocol.Budgets{}, nil
}

// Finish sends the run's result.
func (w *testWorker) Finish(o slots.Outcome) {
	ctx := context.Background()
	s := o.Slot
	w.mu.Lock()
	stalled := w.stalled[s.WorkItemID]
	w.mu.Unlock()
	if stalled {
		w.held <- o
		return
	}
	var err error
	switch o.Kind {
	case slots.Completed:
		_, err = w.p.Do(ctx, protocol.CmdWorkSubmit, s.GroupID, &protocol.SubmitWorkPayload{WorkItemID: s.WorkItemID, OwnershipEpoch: s.OwnershipEpoch,
			LeaseID: s.LeaseID, Artifacts: o.Result.Artifacts, Evidence: o.Result.Evidence, Progress: o.Result.Progress})
	case slots.Preempted:
		prog := protocol.Progress{Phase: o.Checkpoint.Phase, MilestonesCompleted: protocol.List[string]{}, NextCheckpoint: "resume", Blockers: protocol.List[string]{},
			RevisedEstimate: protocol.RevisedEstimate{CompletionAt: protocol.NewTime(w.svc.Now().Add(time.Minute)), Confidence: 0.5}, EvidenceRefs: protocol.List[string]{}}
		_, err = w.p.Do(ctx, protocol.CmdWorkCheckpoint, s.GroupID, &protocol.CheckpointWorkPayload{WorkItemID: s.WorkItemID, OwnershipEpoch: s.OwnershipEpoch,
			LeaseID: s.LeaseID, CheckpointID: o.Checkpoint.ID, StateDigest: o.Checkpoint.Digest, Progress: prog, Reason: protocol.CheckpointPreempted})
	case slots.Failed:
		_, err = w.p.Do(ctx, protocol.CmdWorkFail, s.GroupID, &protocol.FailWorkPayload{WorkItemID: s.WorkItemID, Reason: o.Reason, Evidence: o.Evidence,
			OwnershipEpoch: protocol.Uint64(s.OwnershipEpoch), LeaseID: s.LeaseID})
	}
	if err != nil {
		w.fail(err)
	}
	// The slot is free once Finish returns: start the next won item then.
	go w.drain(ctx)
}

func (w *testWorker) errors() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.errs...)
}
