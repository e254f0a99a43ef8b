package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// clockJump moves the worker's clock or the authority's, not the other.
type clockJump struct {
	authority bool
	by        time.Duration // negative: back
}

func (j clockJump) String() string {
	who := "worker"
	if j.authority {
		who = "authority"
	}
	return fmt.Sprintf("%s %+v", who, j.by)
}

// apply steps one clock: the shared fake clock is the worker's, and the
// authority's is it plus the skew.
func (j clockJump) apply(k *wkit) {
	if j.authority {
		k.ac.skew.Add(int64(j.by))
		return
	}
	k.fc.Step(j.by)
	k.ac.skew.Add(-int64(j.by))
}

// The jumps the suite draws from: within the signature skew, past half a
// lease (a renewal due), past a whole lease, and far past it.
var clockJumps = []time.Duration{20 * time.Second, 61 * time.Second, 3 * time.Minute, 20 * time.Minute}

// TestClockJumpSuite jumps the worker's clock and the authority's, forward
// and back, at seeded moments while items are offered, running and
// finishing (MWP_CLOCK_JUMPS jumps, default 12; MWP_CLOCK_SEED). After
// every jump, by the worker's own clock no run goes on past the end of its
// lease, and no item runs twice at once. Then the clocks agree again and
// the coordinator offers anew whatever a lapsed lease left open: every
// item ends submitted exactly once (or failed, never also submitted), and
// the worker never stopped.
func TestClockJumpSuite(t *testing.T) {
	jumps := envIntT(t, "MWP_CLOCK_JUMPS", 12)
	seed := envIntT(t, "MWP_CLOCK_SEED", int(time.Now().UnixNano()%1_000_000))
	t.Logf("MWP_CLOCK_JUMPS=%d MWP_CLOCK_SEED=%d", jumps, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))

	k := newWKit(t)
	h := newStepHandler(1)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 2))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	const n = 6
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "wi-" + strconv.Itoa(i)
		k.offer(ids[i], protocol.UrgencyNormal, "w1")
	}
	k.waitFor("two running", func(s WorkerStatus) bool { return len(s.Running) == 2 }, tw)

	released := map[string]bool{}
	sound := func(what string) {
		t.Helper()
		k.until(what, func() bool {
			st := tw.w.Status()
			seen := map[string]bool{}
			for _, r := range st.Running {
				if seen[r.WorkItemID] {
					t.Fatalf("%s runs twice at once: %+v", r.WorkItemID, st.Running)
				}
				seen[r.WorkItemID] = true
				if k.fc.Now().After(r.LeaseExpiresAt) {
					return false // must stop by itself: wait for it
				}
			}
			return true
		}, tw)
	}
	for j := range jumps {
		jump := clockJump{authority: rng.IntN(2) == 0, by: clockJumps[rng.IntN(len(clockJumps))]}
		if rng.IntN(2) == 0 {
			jump.by = -jump.by
		}
		jump.apply(k)
		t.Logf("jump %d: %v", j, jump)
		sound(fmt.Sprintf("jump %d (%v): no run past its lease by the worker's clock", j, jump))
		if st := tw.w.Status(); len(st.Running) > 0 && rng.IntN(3) == 0 {
			if id := st.Running[rng.IntN(len(st.Running))].WorkItemID; !released[id] {
				released[id] = true
				h.release(id)
			}
		}
		k.fc.Advance(time.Duration(rng.IntN(10)+1) * time.Second) // time goes on
		sound(fmt.Sprintf("after jump %d: no run past its lease by the worker's clock", j))
	}

	// The clocks agree again: drive every item to its submission.
	k.ac.skew.Store(0)
	for _, id := range ids {
		if !released[id] {
			released[id] = true
			h.release(id)
		}
	}
	offers := map[string]int{}
	tick := k.pacedAdvance(5 * time.Second)
	k.until("every item submitted (or failed)", func() bool {
		done := 0
		for _, id := range ids {
			w := k.item(id)
			switch {
			case w.State == protocol.WorkSubmitted || w.State == protocol.WorkFailed:
				done++
			case w.State == protocol.WorkOpen || (w.State == protocol.WorkOffered && w.Offer != nil && !k.ac.Now().Before(w.Offer.ExpiresAt.Time)) ||
				((w.State == protocol.WorkQueued || w.State == protocol.WorkActive) && !w.OwnerActive(k.ac.Now())):
				// A lapsed lease or start deadline, or an expired offer:
				// the coordinator offers it again (fencing the owner).
				offers[id]++
				offerID := fmt.Sprintf("off-%s-%d", id, offers[id])
				_, _ = k.coord.Do(context.Background(), protocol.CmdWorkOffer, "grp-a", k.offerPayload(id, offerID, k.ac.Now().Add(time.Hour), "w1"))
			}
		}
		if done == n {
			return true
		}
		if d, ok := k.forgottenLapse(tw, ids); ok {
			k.fc.Advance(d)
			return false
		}
		tick()
		return false
	}, tw)
	k.caughtUp(tw) // the authority's state leads its log
	failed := 0
	for _, id := range ids {
		c := k.count(protocol.EvtWorkSubmitted, id)
		if k.state(id) == protocol.WorkFailed {
			// The run failed on its way out of a lease the worker's clock
			// had ended, and the authority, whose clock had not, applied
			// the failure (the worker should send nothing then: open).
			failed++
			c++
		}
		if c != 1 {
			t.Errorf("%s submitted %d times, want once", id, c)
		}
	}
	t.Logf("%d jumps, %d items: %d submitted once each, %d failed; offered again after a lapse: %v", jumps, n, n-failed, failed, offers)
}

// envIntT is an integer from the environment, or def.
func envIntT(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a number", name, v)
	}
	return n
}

// forgottenLapse says how far the clocks must go for the authority to lapse
// an ownership the worker has let go of. The worker ends a run when its own
// clock says the lease is over, and the authority keeps the lease until its
// clock says so; after a jump back that can be more wall time away than a
// paced wait covers. It answers only when the worker has every event the
// authority has logged, runs and holds nothing, and some open item is still
// owned: then nothing but the lapse can move the item on.
func (k *wkit) forgottenLapse(tw *testWorker, ids []string) (time.Duration, bool) {
	st := tw.w.Status()
	if len(st.Running) > 0 || st.Queued > 0 || st.Buffered > 0 {
		return 0, false
	}
	last := k.auth.Service.LastSequence("grp-a")
	if k.auth.Service.DecidedSequence("grp-a") > last {
		return 0, false
	}
	for _, g := range st.Groups {
		if g.GroupID == "grp-a" && (g.Cursor < last || g.Items > 0) {
			return 0, false
		}
	}
	now := k.ac.Now()
	var until time.Time
	for _, id := range ids {
		w := k.item(id)
		if (w.State != protocol.WorkQueued && w.State != protocol.WorkActive) || !w.OwnerActive(now) {
			continue
		}
		end := w.Ownership.StartDeadline.Time
		if w.State == protocol.WorkActive && w.Lease != nil {
			end = w.Lease.ExpiresAt.Time
		}
		if until.IsZero() || end.Before(until) {
			until = end
		}
	}
	if until.IsZero() {
		return 0, false
	}
	return until.Sub(now) + time.Second, true
}
