package slots

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
)

// stepHandler counts to 3 from its resumed state, checkpointing each step
// and yielding at the first safe point after a preemption request. gate,
// when set, holds it after each checkpoint until released or preempted.
func stepHandler(gate chan struct{}) Handler {
	return handler("count", func(ctx context.Context, w *Work) (Result, error) {
		n := 0
		if st, ok := w.Resume(); ok {
			n, _ = strconv.Atoi(string(st))
		}
		for n < 3 {
			n++
			if err := w.Progress(ctx, progress("step-"+strconv.Itoa(n))); err != nil {
				return Result{}, err
			}
			if _, err := w.Checkpoint(ctx, []byte(strconv.Itoa(n)), checkpoint.Meta{Phase: "step-" + strconv.Itoa(n)}); err != nil {
				return Result{}, err
			}
			select {
			case <-w.PreemptRequested():
				return Result{}, ErrPreempted
			case <-gate:
			}
		}
		d, err := w.PublishArtifact(ctx, "text/plain", []byte("counted to 3"))
		if err != nil {
			return Result{}, err
		}
		return Result{Artifacts: []string{d}}, nil
	})
}

// Preemption cycle: request → safe point → checkpoint → slot freed →
// a later run resumes from the checkpoint's state.
func TestPreemptionCycle(t *testing.T) {
	gate := make(chan struct{})
	e := newEnv(t, 1, stepHandler(gate))
	reached := make(chan struct{}, 3)
	e.host.onCheckpoint = func(Slot, checkpoint.Checkpoint) { reached <- struct{}{} }

	a := assignment("grp-a", "wi-1", "lease-1", "count")
	slot := e.start(t, a)
	<-reached // step 1 is durable
	gate <- struct{}{}
	<-reached // step 2 is durable; the handler waits at its safe point
	if err := e.pool.Preempt(slot, "lease-1"); err != nil {
		t.Fatal(err)
	}
	o := e.host.wait(t)
	if o.Kind != Preempted || o.Checkpoint == nil || o.Checkpoint.Digest != protocol.Digest([]byte("2")) || o.Checkpoint.Phase != "step-2" {
		t.Fatalf("outcome %v %+v", o.Kind, o.Checkpoint)
	}
	if e.pool.Free() != 1 {
		t.Fatal("slot not freed")
	}
	if o.Progress == nil || o.Progress.Phase != "step-2" {
		t.Fatalf("last progress %+v", o.Progress)
	}

	// Re-queued and started again under a new lease: resumes at step 3.
	close(gate)
	a.LeaseID = "lease-2"
	e.start(t, a)
	o = e.host.wait(t)
	if o.Kind != Completed || len(o.Result.Artifacts) != 1 {
		t.Fatalf("second run: %v %s", o.Kind, o.Reason)
	}
	log := strings.Join(e.host.callLog(), "\n")
	if strings.Count(log, "progress step-1") != 1 || strings.Count(log, "progress step-3") != 1 {
		t.Fatalf("the second run did not resume from step 2:\n%s", log)
	}
}

// A handler that ignores a preemption request is never cancelled for it
// (spec 11.3: no interruption at an unsafe point), however long it waits.
// Once its lease is lost it is cancelled after the hard timeout, and its
// outcome is LeaseLost even though it then returns a result; its slot
// stays taken until it has really returned.
func TestPreemptIsNeverForcedLeaseLossIs(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	var cause error
	e := newEnv(t, 1, handler("stubborn", func(ctx context.Context, w *Work) (Result, error) {
		close(started)
		<-ctx.Done()
		cause = context.Cause(ctx)
		<-release
		return Result{Artifacts: []string{"sha256:late"}}, nil
	}))
	slot := e.start(t, assignment("g", "wi", "l1", "stubborn"))
	<-started
	e.pool.Preempt(slot, "l1")
	e.advance(10 * time.Second)
	e.advance(10 * time.Minute)
	if e.killed(slot) {
		t.Fatal("cancelled for ignoring a preemption request")
	}
	e.pool.LeaseLost(slot, "l1")
	e.advance(9 * time.Second)
	if e.killed(slot) {
		t.Fatal("cancelled before the hard timeout of the lease loss")
	}
	e.advance(time.Second)
	if !e.killed(slot) {
		t.Fatal("not cancelled at the hard timeout of the lease loss")
	}
	if e.pool.Free() != 0 {
		t.Fatal("slot freed before the handler returned")
	}
	close(release)
	o := e.host.wait(t)
	if o.Kind != LeaseLost {
		t.Fatalf("outcome %v %q", o.Kind, o.Reason)
	}
	var k errKilled
	if !errors.As(cause, &k) || !strings.Contains(k.reason, "lease loss") {
		t.Fatalf("context cause %v", cause)
	}
}

// A handler running past its lease is cancelled and reported Failed.
func TestLeaseExpiry(t *testing.T) {
	started := make(chan struct{})
	e := newEnv(t, 1, handler("slow", func(ctx context.Context, w *Work) (Result, error) {
		close(started)
		<-ctx.Done()
		return Result{}, nil
	}))
	slot := e.start(t, assignment("g", "wi", "l1", "slow"))
	<-started
	e.advance(59 * time.Minute)
	if e.killed(slot) {
		t.Fatal("cancelled inside the lease")
	}
	// A renewal moves the boundary.
	e.pool.RenewLease(slot, "l1", t0.Add(2*time.Hour))
	e.advance(30 * time.Minute)
	if e.killed(slot) {
		t.Fatal("cancelled inside the renewed lease")
	}
	e.advance(31 * time.Minute)
	if o := e.host.wait(t); o.Kind != Failed || o.Reason != "execution lease expired" {
		t.Fatalf("outcome %v %q", o.Kind, o.Reason)
	}
}

// After LeaseLost the handler stops at its next safe point; it may still
// checkpoint locally but the host is not told, its progress, artifacts and
// tool calls are refused, and its result is never reported as current.
func TestLeaseLost(t *testing.T) {
	errs := make(chan [3]error, 1)
	e := newEnv(t, 1, handler("h", func(ctx context.Context, w *Work) (Result, error) {
		<-w.PreemptRequested()
		_, cpErr := w.Checkpoint(ctx, []byte("local"), checkpoint.Meta{Phase: "after-loss"})
		prErr := w.Progress(ctx, progress("late"))
		_, tcErr := w.ToolCall(ctx, Op{ID: "op", Tool: "git", Operation: "read", Risk: Risk{Class: protocol.RiskLow}},
			func(context.Context, string) ([]byte, error) { t.Error("tool ran after lease loss"); return nil, nil })
		errs <- [3]error{cpErr, prErr, tcErr}
		return Result{Artifacts: []string{"sha256:late"}}, nil
	}))
	slot := e.start(t, assignment("g", "wi", "l1", "h"))
	if err := e.pool.LeaseLost(slot, "l2"); !errors.Is(err, ErrNoRun) {
		t.Fatalf("wrong lease id: %v", err)
	}
	e.pool.LeaseLost(slot, "l1")
	o := e.host.wait(t)
	if o.Kind != LeaseLost || len(o.Result.Artifacts) != 1 {
		t.Fatalf("outcome %v %+v", o.Kind, o.Result)
	}
	got := <-errs
	if got[0] != nil {
		t.Fatalf("local checkpoint after loss: %v", got[0])
	}
	for _, err := range got[1:] {
		if protocol.CodeOf(err) != protocol.CodeWorkLeaseExpired {
			t.Fatalf("after loss: %v", err)
		}
	}
	if c, err := e.store.Latest("g", "wi"); err != nil || string(c.State) != "local" {
		t.Fatalf("local checkpoint: %v", err)
	}
	for _, call := range e.host.callLog() {
		if strings.Contains(call, "after-loss") || strings.Contains(call, "late") {
			t.Fatalf("host told after the loss: %s", call)
		}
	}
}

// Block saves a checkpoint, ends the run as Blocked, and the Work is dead
// afterwards.
func TestBlock(t *testing.T) {
	after := make(chan error, 1)
	e := newEnv(t, 1, handler("h", func(ctx context.Context, w *Work) (Result, error) {
		if err := w.Block(ctx, protocol.Resolution{Kind: "bogus", Detail: "x"}, nil); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
			t.Errorf("bad kind: %v", err)
		}
		err := w.Block(ctx, protocol.Resolution{Kind: protocol.ResolutionClarification, Detail: "which branch?"}, []byte("half"))
		after <- w.Progress(ctx, progress("more"))
		return Result{}, err
	}))
	e.start(t, assignment("g", "wi", "l1", "h"))
	o := e.host.wait(t)
	if o.Kind != Blocked || o.Resolution.Detail != "which branch?" || o.Checkpoint == nil || o.Checkpoint.Digest != protocol.Digest([]byte("half")) {
		t.Fatalf("outcome %v %+v", o.Kind, o)
	}
	if err := <-after; !errors.Is(err, ErrEnded) {
		t.Fatalf("progress after block: %v", err)
	}
}

// Yielding without any checkpoint cannot be reported as a checkpoint.
func TestPreemptWithoutCheckpoint(t *testing.T) {
	e := newEnv(t, 1, handler("h", func(ctx context.Context, w *Work) (Result, error) {
		<-w.PreemptRequested()
		return Result{Preempted: true}, nil
	}))
	slot := e.start(t, assignment("g", "wi", "l1", "h"))
	e.pool.Preempt(slot, "l1")
	if o := e.host.wait(t); o.Kind != Failed || !strings.Contains(o.Reason, "without any checkpoint") {
		t.Fatalf("outcome %v %q", o.Kind, o.Reason)
	}
}

func TestPanicIsFailure(t *testing.T) {
	e := newEnv(t, 1, handler("h", func(context.Context, *Work) (Result, error) { panic("boom") }))
	e.start(t, assignment("g", "wi", "l1", "h"))
	if o := e.host.wait(t); o.Kind != Failed || !strings.Contains(o.Reason, "boom") || o.Attempts != 1 {
		t.Fatalf("outcome %v %q", o.Kind, o.Reason)
	}
}

func TestStartRefusals(t *testing.T) {
	hold := make(chan struct{})
	e := newEnv(t, 1, handler("h", func(ctx context.Context, w *Work) (Result, error) {
		<-hold
		return Result{}, nil
	}))
	ok := assignment("g", "wi", "l1", "h")
	for _, tc := range []struct {
		name  string
		edit  func(*Assignment)
		check func(error) bool
	}{
		{"no lease id", func(a *Assignment) { a.LeaseID = "" }, func(err error) bool { return protocol.CodeOf(err) == protocol.CodeInvalidCommand }},
		{"expired lease", func(a *Assignment) { a.LeaseExpiresAt = t0 }, func(err error) bool { return protocol.CodeOf(err) == protocol.CodeWorkLeaseExpired }},
		{"context not JSON", func(a *Assignment) { a.Context = []byte("{") }, func(err error) bool { return protocol.CodeOf(err) == protocol.CodeInvalidCommand }},
		{"context not a package", func(a *Assignment) { a.Context = []byte(`{"mission":"g"}`) }, func(err error) bool { return protocol.CodeOf(err) == protocol.CodeInvalidCommand }},
		{"another Mission's context", func(a *Assignment) { a.Context = contextFor(a.GroupID, "mis-other", a.WorkItemID) }, isScope("/scope/missionId")},
		{"another Group's context", func(a *Assignment) { a.Context = contextFor("grp-other", a.MissionID, a.WorkItemID) }, isScope("/scope/groupId")},
		{"another WorkItem's context", func(a *Assignment) { a.Context = contextFor(a.GroupID, a.MissionID, "wi-other") }, isScope("/scope/workItemId")},
		{"no handler", func(a *Assignment) { a.Contract.RequiredCapabilities = caps("other") }, func(err error) bool { return errors.Is(err, ErrNoHandler) }},
		{"version mismatch", func(a *Assignment) { a.Contract.RequiredCapabilities[0].Version = "2.x" }, func(err error) bool { return errors.Is(err, ErrNoHandler) }},
	} {
		a := ok
		a.Contract = contract("h")
		tc.edit(&a)
		if _, err := e.pool.Start(a); !tc.check(err) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	e.start(t, ok)
	dup := ok
	dup.LeaseID = "l2"
	if _, err := e.pool.Start(dup); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("same item twice: %v", err)
	}
	other := assignment("g", "wi-2", "l3", "h")
	if _, err := e.pool.Start(other); !errors.Is(err, ErrNoFreeSlot) {
		t.Errorf("full pool: %v", err)
	}
	close(hold)
	e.host.wait(t)
}

// An assignment older than a stored checkpoint's ownership epoch is stale.
func TestStaleEpoch(t *testing.T) {
	e := newEnv(t, 1, handler("h", func(context.Context, *Work) (Result, error) { return Result{}, nil }))
	if _, err := e.store.Save(checkpoint.Key{GroupID: "g", WorkItemID: "wi", OwnershipEpoch: 5}, t0, checkpoint.Meta{}, nil); err != nil {
		t.Fatal(err)
	}
	e.start(t, assignment("g", "wi", "l1", "h"))
	if o := e.host.wait(t); o.Kind != Failed || protocol.CodeOf(o.Err) != protocol.CodeWorkStaleOwnership {
		t.Fatalf("outcome %v %v", o.Kind, o.Err)
	}
}

// Shutdown asks running handlers to yield and is safe twice.
func TestShutdown(t *testing.T) {
	e := newEnv(t, 2, stepHandler(nil))
	e.start(t, assignment("g", "wi", "l1", "count"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.pool.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if o := e.host.wait(t); o.Kind != Preempted {
		t.Fatalf("outcome %v %q", o.Kind, o.Reason)
	}
	if err := e.pool.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Start(assignment("g", "wi2", "l2", "count")); !errors.Is(err, ErrClosed) {
		t.Fatalf("start after shutdown: %v", err)
	}
}

func isScope(pointer string) func(error) bool {
	return func(err error) bool {
		var pe *protocol.Error
		return errors.As(err, &pe) && pe.Code == protocol.CodeInvalidCommand && pe.Pointer == pointer
	}
}
