package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// The authority's clock jumps forward past a running item's lease: the
// worker's next renewal is refused as expired, the worker stops the run at
// its safe point and submits nothing under the lapsed lease; re-offered to
// it, the item runs again under a higher epoch and completes.
func TestAuthorityClockJumpsForwardPastTheLease(t *testing.T) {
	k, h, tw := runningOneItem(t)
	epoch1 := k.item("wi-1").Ownership.OwnershipEpoch

	// Past the 2-minute lease at the renewal, within the 2-minute skew the
	// authority allows a signature.
	k.ac.skew.Store(int64(90 * time.Second))
	k.fc.Advance(61 * time.Second) // the worker's renewal is due
	k.waitFor("the run stopped", func(s WorkerStatus) bool { return len(s.Running) == 0 }, tw)
	if !strings.Contains(k.logs.String(), string(protocol.CodeWorkLeaseExpired)) {
		t.Fatalf("the run stopped, but not for the expired lease:\n%s", k.logs)
	}
	if i := hasLine(k.trace(), "work.submitted wi-1"); i >= 0 {
		t.Fatalf("submitted under the lapsed lease:\n%s", strings.Join(k.trace(), "\n"))
	}

	k.reoffer("wi-1", "off-wi-1-again", "w1")
	k.waitFor("running again", runningAll("wi-1"), tw)
	if o := k.item("wi-1").Ownership; o == nil || o.OwnerAgentID != "w1" || o.OwnershipEpoch <= epoch1 {
		t.Fatalf("ownership after the re-offer %+v, want w1 above epoch %d", o, epoch1)
	}
	h.release("wi-1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
}

// The authority's clock jumps so far forward that every command of the
// worker is refused as stale: the worker never hears that its lease
// lapsed, and stops the run by its own view of the lease's end.
func TestAuthorityClockJumpsFarForward(t *testing.T) {
	k, _, tw := runningOneItem(t)
	expires := k.item("wi-1").Lease.ExpiresAt.Time

	k.ac.skew.Store(int64(10 * time.Minute))
	k.fc.Advance(expires.Sub(k.fc.Now()) - 3*time.Second) // renewals due, refused as stale
	tick := k.pacedAdvance(time.Second)
	k.until("stopped by the lease's end", func() bool {
		if len(tw.w.Status().Running) == 0 {
			return true
		}
		if k.fc.Now().After(expires.Add(5 * time.Second)) {
			t.Fatalf("still running at %v, past the lease's end %v:\n%s", k.fc.Now(), expires, k.logs)
		}
		tick()
		return false
	}, tw)
	if i := hasLine(k.trace(), "work.submitted wi-1"); i >= 0 {
		t.Fatalf("submitted under the lapsed lease:\n%s", strings.Join(k.trace(), "\n"))
	}
}

// The authority's clock jumps back by more than the signature skew it
// allows: the worker's commands look issued in the future and are
// refused, nothing changes state; once the clock is right again the
// worker's next renewal is accepted and the run goes on under its lease.
func TestAuthorityClockJumpsBackThenRecovers(t *testing.T) {
	k, h, tw := runningOneItem(t)
	lease := k.item("wi-1").Lease
	last := k.auth.Service.LastSequence("grp-a")

	k.ac.skew.Store(int64(-5 * time.Minute))
	k.fc.Advance(61 * time.Second)
	renewed := func() bool { l := k.item("wi-1").Lease; return l != nil && len(l.Renewals) > 0 }
	// Wait for the renewal's answer, whichever it is, so that an accepted
	// renewal fails here at once rather than by the wait's timeout.
	k.until("a renewal answered", func() bool { return strings.Contains(k.logs.String(), "command refused") || renewed() }, tw)
	if renewed() {
		t.Fatalf("a renewal issued in the authority's future was accepted: %+v", k.item("wi-1").Lease)
	}
	if got := k.auth.Service.LastSequence("grp-a"); got != last {
		t.Fatalf("a command issued in the authority's future changed the log: %d events after %d", got, last)
	}

	k.ac.skew.Store(0)
	tick := k.pacedAdvance(time.Second) // the worker retries a refused renewal on its tick
	k.until("renewed once the clock is right", func() bool {
		if l := k.item("wi-1").Lease; l != nil && len(l.Renewals) > 0 {
			return true
		}
		tick()
		return false
	}, tw)
	if l := k.item("wi-1").Lease; l.LeaseID != lease.LeaseID || !l.ExpiresAt.Time.After(lease.ExpiresAt.Time) {
		t.Fatalf("lease after the renewal %+v, was %+v", l, lease)
	}
	if st := tw.w.Status(); len(st.Running) != 1 {
		t.Fatalf("the run did not go on: %+v", st.Running)
	}
	h.release("wi-1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
}

// The worker's clock runs ahead of the authority's by more than the skew
// it allows: the acceptance of an offer is refused for its issuedAt, which
// decides nothing about the offer. Once the clocks agree the worker builds
// it again and the item runs, without a new offer.
func TestWorkerClockAheadRetriesOnceClocksAgree(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	clockJump{by: 5 * time.Minute}.apply(k)
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	owned := func() bool { return k.item("wi-1").Ownership != nil }
	k.until("the acceptance answered", func() bool {
		return strings.Contains(k.logs.String(), "is in the future") || owned()
	}, tw)
	if owned() {
		t.Fatalf("an acceptance issued in the authority's future was accepted: %+v", k.item("wi-1").Ownership)
	}

	clockJump{by: -5 * time.Minute}.apply(k)
	tick := k.pacedAdvance(time.Second)
	k.waitFor("running without a new offer", func(s WorkerStatus) bool {
		tick()
		return runningAll("wi-1")(s)
	}, tw)
	h.release("wi-1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
}

// The worker's clock jumps forward past its lease (the authority's does
// not): by its own view the lease is gone, so the run stops and nothing is
// sent under that lease, not even the failure its handler reports on the
// way out; the authority, for which the lease still runs, applies nothing.
func TestWorkerClockJumpsPastItsLeaseSendsNothing(t *testing.T) {
	k, h, tw := runningOneItem(t)
	last := k.auth.Service.LastSequence("grp-a")
	clockJump{by: 3 * time.Minute}.apply(k)
	h.release("wi-1") // its next progress report meets the expired credentials
	k.sentNothingAfter(tw, last)
}

// runningOneItem is a one-slot worker w1 running wi-1 of grp-a.
func runningOneItem(t *testing.T) (*wkit, *stepHandler, *testWorker) {
	t.Helper()
	k := newWKit(t)
	h := newStepHandler(1)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	return k, h, tw
}

// pacedAdvance returns a step that moves the fake clock by d at most once
// per 100 ms of real time. A wait that advanced on every poll could run the
// worker's clock past a lease's end (59 s of headroom in a few hundred
// polls) before a renewal's round trip came back on a loaded machine, and
// the test would see the lease lapse instead of what it waits for.
func (k *wkit) pacedAdvance(d time.Duration) func() {
	var last time.Time
	return func() {
		if time.Since(last) < 100*time.Millisecond {
			return
		}
		last = time.Now()
		k.fc.Advance(d)
	}
}

// failAtRelease fails its run as soon as the test releases it.
type failAtRelease struct{ release chan struct{} }

func (h failAtRelease) Capability() protocol.Capability {
	return protocol.Capability{ID: "code.implement", Version: "1.2.0"}
}

func (h failAtRelease) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	select {
	case <-h.release:
		return slots.Result{}, errors.New("the tool crashed")
	case <-ctx.Done():
		return slots.Result{}, ctx.Err()
	}
}

// A run that fails just as its lease ends by the worker's clock sends no
// work.fail, even to an authority whose clock is behind and would take it.
func TestWorkerFailAfterItsLeaseSendsNothing(t *testing.T) {
	k := newWKit(t)
	h := failAtRelease{release: make(chan struct{})}
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("running", runningAll("wi-1"), tw)
	last := k.auth.Service.LastSequence("grp-a")
	clockJump{by: 3 * time.Minute}.apply(k)
	close(h.release)
	k.sentNothingAfter(tw, last)
	for _, o := range tw.w.Status().Outcomes {
		if o.WorkItemID == "wi-1" && o.Sent != "" {
			t.Fatalf("outcome %+v was sent", o)
		}
	}
}

// sentNothingAfter waits until wi-1's run has stopped and its outcome has
// settled, and fails if grp-a's log grew past last meanwhile.
func (k *wkit) sentNothingAfter(tw *testWorker, last uint64) {
	k.t.Helper()
	k.waitFor("the run stopped", func(s WorkerStatus) bool { return len(s.Running) == 0 }, tw)
	k.until("the outcome settled", func() bool {
		for _, o := range tw.w.Status().Outcomes {
			if o.WorkItemID == "wi-1" {
				return true
			}
		}
		return false
	}, tw)
	k.caughtUp(tw)
	if got := k.auth.Service.LastSequence("grp-a"); got != last {
		k.t.Fatalf("%d events after the worker's lease ended by its clock:\n%s", got-last, strings.Join(k.trace(), "\n"))
	}
}

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
	for j := range jumps {
		jump := clockJump{authority: rng.IntN(2) == 0, by: clockJumps[rng.IntN(len(clockJumps))]}
		if rng.IntN(2) == 0 {
			jump.by = -jump.by
		}
		jump.apply(k)
		t.Logf("jump %d: %v", j, jump)
		k.runsWithinLeases(t, tw, fmt.Sprintf("jump %d (%v): no run past its lease by the worker's clock", j, jump))
		if st := tw.w.Status(); len(st.Running) > 0 && rng.IntN(3) == 0 {
			if id := st.Running[rng.IntN(len(st.Running))].WorkItemID; !released[id] {
				released[id] = true
				h.release(id)
			}
		}
		k.fc.Advance(time.Duration(rng.IntN(10)+1) * time.Second) // time goes on
		k.runsWithinLeases(t, tw, fmt.Sprintf("after jump %d: no run past its lease by the worker's clock", j))
	}

	// The clocks agree again: drive every item to its submission.
	k.ac.skew.Store(0)
	for _, id := range ids {
		if !released[id] {
			released[id] = true
			h.release(id)
		}
	}
	offers := k.driveToSubmission(tw, ids)
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

// runsWithinLeases waits until no run is past its lease by the worker's
// clock (a run must stop by itself), failing at once if one item runs
// twice.
func (k *wkit) runsWithinLeases(t *testing.T, tw *testWorker, what string) {
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

// driveToSubmission moves time on until every item is submitted (or
// failed), offering again, as a coordinator would, an item whose lease or
// start deadline lapsed or whose offer expired; it returns how often each
// was offered again.
func (k *wkit) driveToSubmission(tw *testWorker, ids []string) map[string]int {
	offers := map[string]int{}
	tick := k.pacedAdvance(5 * time.Second)
	k.until("every item submitted (or failed)", func() bool {
		done := 0
		for _, id := range ids {
			w := k.item(id)
			switch {
			case w.State == protocol.WorkSubmitted || w.State == protocol.WorkFailed:
				done++
			case k.lapsed(w):
				offers[id]++
				offerID := fmt.Sprintf("off-%s-%d", id, offers[id])
				_, _ = k.coord.Do(context.Background(), protocol.CmdWorkOffer, "grp-a", k.offerPayload(id, offerID, k.ac.Now().Add(time.Hour), "w1"))
			}
		}
		if done == len(ids) {
			return true
		}
		if d, ok := k.forgottenLapse(tw, ids); ok {
			k.fc.Advance(d)
			return false
		}
		tick()
		return false
	}, tw)
	return offers
}

// lapsed reports an item a coordinator offers again: open, its offer
// expired, or its owner's lease or start deadline lapsed (the new offer
// fences the owner).
func (k *wkit) lapsed(w group.WorkItem) bool {
	now := k.ac.Now()
	return w.State == protocol.WorkOpen || (w.State == protocol.WorkOffered && w.Offer != nil && !now.Before(w.Offer.ExpiresAt.Time)) ||
		((w.State == protocol.WorkQueued || w.State == protocol.WorkActive) && !w.OwnerActive(now))
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
