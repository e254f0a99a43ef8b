package poc

import (
	"context"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/slots"
)

// awaitHolding waits (bounded) until a run waits at h.
func awaitHolding(t *testing.T, h *Hold) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !h.Holding() {
		if time.Now().After(deadline) {
			t.Fatal("no run came to the hold")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noOutcome fails when the held run has ended.
func noOutcome(t *testing.T, r *handlerRig) {
	t.Helper()
	select {
	case o := <-r.host.outcomes:
		t.Fatalf("a held run ended: %+v", o)
	default:
	}
}

// A run held before its first step does nothing until released, then
// completes; one held at its first safe point yields with its checkpoint
// when preempted; a released hold, or one armed for another agent or item,
// holds nothing.
func TestHolds(t *testing.T) { eachLanguage(t, testHolds) }

func testHolds(t *testing.T, lang string, rig rigMaker) {
	f := MissionA(base).Feature
	a := MissionA(base)
	t.Run("at start, released", func(t *testing.T) {
		holds := NewHolds()
		h := holds.Arm("w1", "grp-a", stageOf(a, StageRequirements), HoldAtStart)
		r := rig(t, nil, holds)
		req := r.host.put(FeatureRequest(f))
		r.start(StageRequirements, "lease-r", 1, map[string]string{OutFeatureRequest: req})
		awaitHolding(t, h)
		noOutcome(t, r)
		r.host.mu.Lock()
		phases := len(r.host.phases)
		r.host.mu.Unlock()
		// The Go handler reports its first phase before the hold; the
		// Python program is not started until the hold is released.
		if want := map[string]int{"go": 1, "python": 0}[lang]; phases != want {
			t.Fatalf("held before its first step, the run reported %d phases, want %d", phases, want)
		}
		select {
		case <-holds.Moved():
		default:
			t.Fatal("reaching the hold was not signalled")
		}
		h.Release()
		if o := r.wait(StageRequirements); !passed(o) {
			t.Fatalf("after release: %+v", o)
		}
		if h.Holding() || h.Reached() != 1 {
			t.Fatalf("holding %v reached %d", h.Holding(), h.Reached())
		}
	})
	t.Run("at the safe point, preempted", func(t *testing.T) {
		holds := NewHolds()
		h := holds.Arm("w1", "grp-a", stageOf(a, StageImplementation), HoldAtSafePoint)
		r := rig(t, nil, holds)
		note, _ := RequirementsNote(f, "sha256:"+"0000000000000000000000000000000000000000000000000000000000000000")
		slot := r.start(StageImplementation, "lease-i", 1, map[string]string{OutRequirements: r.host.put(note)})
		awaitHolding(t, h)
		noOutcome(t, r)
		if err := r.host.pool.Preempt(slot, "lease-i"); err != nil {
			t.Fatal(err)
		}
		o := r.wait(StageImplementation)
		if o.Kind != slots.Preempted || o.Checkpoint == nil || o.Checkpoint.Phase != "read requirements" {
			t.Fatalf("preempted at the hold: %+v", o)
		}
		if h.Released() {
			t.Fatal("a preemption released the hold")
		}
	})
	t.Run("released, another agent, another item", func(t *testing.T) {
		holds := NewHolds()
		id := stageOf(a, StageRequirements)
		released := holds.Arm("w1", "grp-a", id, HoldAtStart)
		released.Release()
		other := holds.Arm("w2", "grp-a", id, HoldAtStart)
		elsewhere := holds.Arm("w1", "grp-a", stageOf(a, StageReview), HoldAtStart)
		r := rig(t, nil, holds)
		req := r.host.put(FeatureRequest(f))
		if o := r.run(StageRequirements, "lease-r", 1, map[string]string{OutFeatureRequest: req}); !passed(o) {
			t.Fatalf("%+v", o)
		}
		for _, h := range []*Hold{released, other, elsewhere} {
			if h.Reached() != 0 {
				t.Fatalf("a hold that should not apply was reached")
			}
		}
		holds.ReleaseAll()
		if !other.Released() || !elsewhere.Released() {
			t.Fatal("ReleaseAll left a hold armed")
		}
	})
	// A run whose context ends stops waiting.
	t.Run("context ends", func(t *testing.T) {
		holds := NewHolds()
		h := holds.Arm("w1", "grp-a", stageOf(a, StageRequirements), HoldAtStart)
		r := rig(t, nil, holds)
		req := r.host.put(FeatureRequest(f))
		r.start(StageRequirements, "lease-r", 1, map[string]string{OutFeatureRequest: req})
		awaitHolding(t, h)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.host.pool.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown with a held run: %v", err)
		}
		if h.Holding() {
			t.Fatal("still held after the pool shut down")
		}
	})
}
