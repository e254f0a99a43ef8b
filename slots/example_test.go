package slots_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// counter counts to 3, one checkpointed step at a time. Each checkpoint
// is a safe point: there it yields if it was asked to.
type counter struct{}

func (counter) Capability() protocol.Capability {
	return protocol.Capability{ID: "example.count", Version: "1.0.0"}
}

func (counter) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	n := 0
	if state, ok := w.Resume(); ok {
		n, _ = strconv.Atoi(string(state))
		fmt.Println("handler: resumed at", n)
	}
	for n < 3 {
		n++
		phase := "step " + strconv.Itoa(n)
		err := w.Progress(ctx, protocol.Progress{Phase: phase, NextCheckpoint: "after " + phase,
			MilestonesCompleted: []string{phase},
			RevisedEstimate:     protocol.RevisedEstimate{CompletionAt: protocol.NewTime(time.Now().Add(time.Minute)), Confidence: 0.9}})
		if err != nil {
			return slots.Result{}, err
		}
		if _, err := w.Checkpoint(ctx, []byte(strconv.Itoa(n)), checkpoint.Meta{Phase: phase}); err != nil {
			return slots.Result{}, err
		}
		select {
		case <-w.PreemptRequested():
			return slots.Result{}, slots.ErrPreempted
		default:
		}
	}
	d, err := w.PublishArtifact(ctx, "text/plain", []byte("counted to 3"))
	return slots.Result{Artifacts: []string{d}}, err
}

// exampleHost prints what the runtime would send, and preempts the first
// run once it reports step 1 (as the scheduler would for a more urgent
// item).
type exampleHost struct {
	pool     *slots.Pool
	outcomes chan slots.Outcome
}

func (h *exampleHost) Progress(_ context.Context, s slots.Slot, p protocol.Progress) error {
	fmt.Println("host: progress", p.Phase)
	if s.LeaseID == "lease-1" && p.Phase == "step 1" {
		h.pool.Preempt(s.Index, s.LeaseID)
	}
	return nil
}

func (h *exampleHost) Checkpointed(_ context.Context, _ slots.Slot, c checkpoint.Checkpoint) error {
	fmt.Println("host: checkpoint", c.Phase)
	return nil
}

func (h *exampleHost) PublishArtifact(_ context.Context, _ slots.Slot, a slots.Artifact) (string, error) {
	return protocol.Digest(a.Data), nil
}

func (h *exampleHost) Allow(context.Context, slots.Slot, slots.Risk) error { return nil }

func (h *exampleHost) Remaining(context.Context, slots.Slot) (protocol.Budgets, error) {
	return protocol.Budgets{}, nil
}

func (h *exampleHost) Finish(o slots.Outcome) { h.outcomes <- o }

// A handler reports progress and checkpoints; preempted, it yields at its
// next safe point, and the next run of the WorkItem resumes from there.
func ExamplePool() {
	dir, _ := os.MkdirTemp("", "slots-example")
	defer os.RemoveAll(dir)
	db, _ := bolt.Open(filepath.Join(dir, "worker.db"), 0o600, nil)
	defer db.Close()
	store, _ := checkpoint.Open(db, filepath.Join(dir, "blobs"))

	host := &exampleHost{outcomes: make(chan slots.Outcome, 1)}
	pool, err := slots.New(slots.Config{AgentID: "worker-1", Slots: 2, Handlers: []slots.Handler{counter{}},
		Host: host, Checkpoints: store, WorkRoot: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	host.pool = pool
	defer pool.Shutdown(context.Background())

	a := slots.Assignment{
		GroupID: "grp-a", MissionID: "mis-a", WorkItemID: "wi-1", OwnershipEpoch: 1,
		LeaseID: "lease-1", LeaseExpiresAt: time.Now().Add(time.Hour),
		Contract: protocol.WorkContract{
			RequiredCapabilities: []protocol.Capability{{ID: "example.count", Version: "1.x"}},
			RetryPolicy:          protocol.RetryPolicy{MaxAttempts: 1},
		},
	}
	for _, lease := range []string{"lease-1", "lease-2"} {
		a.LeaseID = lease
		if _, err := pool.Start(a); err != nil {
			fmt.Println(err)
			return
		}
		o := <-host.outcomes
		fmt.Print("outcome: ", o.Kind)
		if o.Checkpoint != nil {
			fmt.Print(" at ", o.Checkpoint.Phase)
		}
		fmt.Println()
	}
	// Output:
	// host: progress step 1
	// host: checkpoint step 1
	// outcome: preempted at step 1
	// handler: resumed at 1
	// host: progress step 2
	// host: checkpoint step 2
	// host: progress step 3
	// host: checkpoint step 3
	// outcome: completed
}
