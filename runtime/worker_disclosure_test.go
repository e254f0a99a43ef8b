package runtime

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/scheduler"
)

// acceptedDisclosure is the schedule disclosure the worker published with
// its acceptance of item id, read from the Group log.
func (k *wkit) acceptedDisclosure(id string) (protocol.ScheduleDisclosure, bool) {
	for _, ev := range k.events() {
		if ev.Type != protocol.EvtWorkOfferAccepted || ev.Aggregate.ID != id {
			continue
		}
		var p struct {
			ScheduleDisclosure *protocol.ScheduleDisclosure `json:"scheduleDisclosure"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			k.t.Fatal(err)
		}
		if p.ScheduleDisclosure != nil {
			return *p.ScheduleDisclosure, true
		}
	}
	return protocol.ScheduleDisclosure{}, false
}

// What the running worker publishes (spec 11.2), read back from the
// authority's log: the start window, completion and confidence come from
// its queue and the observed durations of its runs, not from the
// configured guess, and a material change is published again.
func TestWorkerPublishedDisclosure(t *testing.T) {
	k := newWKitLease(t, time.Hour)
	h := newStepHandler(1)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.Estimate, cfg.QueueDepth = time.Minute, 8 // the guess before any run
	cfg.Scheduler.MaxWait = [4]time.Duration{scheduler.UrgencyLow: 2 * time.Hour, scheduler.UrgencyNormal: time.Hour,
		scheduler.UrgencyHigh: 30 * time.Minute, scheduler.UrgencyCritical: time.Second}
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")

	// No history: no confidence, but a start is never a point (one tick
	// of latency until a start has been observed).
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-1 running", runningAll("wi-1"), tw)
	k.caughtUp(tw)
	d1, ok := k.acceptedDisclosure("wi-1")
	if !ok || d1.Confidence != 0 || !d1.EstimatedStartWindow.From.Time.Before(d1.EstimatedStartWindow.To.Time) {
		t.Fatalf("first disclosure %+v (published %v)", d1, ok)
	}
	// A 10-minute run: the capability's observed duration.
	k.fc.Advance(10 * time.Minute)
	h.release("wi-1")
	k.until("wi-1 submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)

	h2 := "wi-2"
	k.offer(h2, protocol.UrgencyNormal, "w1")
	k.waitFor("wi-2 running", runningAll(h2), tw)
	k.offer("wi-3", protocol.UrgencyNormal, "w1")
	k.until("wi-3 queued", func() bool { return k.state("wi-3") == protocol.WorkQueued }, tw)
	k.caughtUp(tw)
	d3, ok := k.acceptedDisclosure("wi-3")
	now := k.fc.Now()
	switch {
	case !ok:
		t.Fatal("no disclosure with the acceptance of wi-3")
	case d3.Confidence <= 0:
		t.Fatalf("confidence %v after an observed run", d3.Confidence)
	case !d3.EstimatedStartWindow.From.Time.Equal(now.Add(10 * time.Minute)):
		// wi-2 runs ahead in the only slot for its observed 10 minutes.
		t.Fatalf("start from %s, want %s (behind wi-2's observed run)", d3.EstimatedStartWindow.From, now.Add(10*time.Minute))
	case !d3.EstimatedStartWindow.From.Time.Before(d3.EstimatedStartWindow.To.Time):
		t.Fatalf("start window %+v is a point", d3.EstimatedStartWindow)
	case d3.EstimatedCompletion.Time.Sub(d3.EstimatedStartWindow.To.Time) != 10*time.Minute:
		t.Fatalf("completion %s is not the latest start plus the observed 10 minutes (window %+v)", d3.EstimatedCompletion, d3.EstimatedStartWindow)
	}

	// An item ahead of wi-3 moves its start by its 10 minutes: published.
	k.fc.Advance(2 * time.Minute) // past the disclosure threshold
	k.offer("wi-4", protocol.UrgencyHigh, "w1")
	k.until("update of wi-3 posted", func() bool { return len(k.messages("wi-3")) > 0 }, tw)
	_, block := noticeObject(t, k.messages("wi-3")[0].Text)
	var got DisclosureNotice
	if err := json.Unmarshal(block, &got); err != nil {
		t.Fatal(err)
	}
	if got.Confidence <= 0 || !got.EstimatedStartWindow.From.Time.Before(got.EstimatedStartWindow.To.Time) ||
		!got.EstimatedStartWindow.From.Time.Equal(d3.EstimatedStartWindow.From.Time.Add(10*time.Minute)) {
		t.Fatalf("update %s, first %+v", block, d3)
	}
}

// The history is the worker's, per capability: the first item of a Group
// the worker has never run anything for is disclosed with the confidence
// and the duration of the runs it made elsewhere (an aggregate of its own
// runs, nothing of the other Group's items).
func TestWorkerDisclosureConfidenceFromCapabilityHistory(t *testing.T) {
	k := newWKitLease(t, time.Hour)
	h := newStepHandler(1)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.Estimate = time.Minute
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-1 running", runningAll("wi-1"), tw)
	k.fc.Advance(10 * time.Minute)
	h.release("wi-1")
	k.until("wi-1 submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)

	// A second Group, new to the scheduler.
	do := func(p interface {
		Do(context.Context, protocol.CommandType, string, any, ...func(*protocol.Envelope)) (*protocol.Receipt, error)
	}, typ protocol.CommandType, payload any) {
		t.Helper()
		if _, err := p.Do(context.Background(), typ, "grp-b", payload); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
	do(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-b", Title: "Other", Objective: "ship", PriorityClass: protocol.PriorityNormal})
	do(k.alice, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-b", AgentID: "coord", LeaseDurationMs: uint64((10 * time.Hour).Milliseconds())})
	do(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{
		Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	tw.w.AddGroup("grp-b")
	now := k.ac.Now()
	do(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wb-1", MissionID: "mis-b", Contract: contractFor("wb-1", protocol.UrgencyNormal, now)})
	w, _ := k.auth.Service.WorkItem("grp-b", "wb-1")
	do(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wb-1", OfferID: "off-wb-1", Contract: w.Contract,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: protocol.SelectionBasis{
			CapabilityMatches:     protocol.List[protocol.CapabilityMatch]{{ID: "code.implement", Required: "1.x", Offered: "1.2.0"}},
			AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.9},
			ExpectedCost: protocol.Budgets{Tokens: protocol.Uint64(100)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{},
			PolicyRulesApplied: protocol.List[string]{"capability-match"}}}},
		ExpiresAt: protocol.NewTime(now.Add(time.Hour))})
	k.until("wb-1 accepted", func() bool { w, _ := k.auth.Service.WorkItem("grp-b", "wb-1"); return w.State != protocol.WorkOffered }, tw)

	var d *protocol.ScheduleDisclosure
	k.until("acceptance of wb-1 in grp-b's log", func() bool {
		evs, err := k.auth.Service.Events("grp-b", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, se := range evs {
			var ev protocol.Event
			if err := json.Unmarshal(se.Raw, &ev); err != nil {
				t.Fatal(err)
			}
			var p struct {
				ScheduleDisclosure *protocol.ScheduleDisclosure `json:"scheduleDisclosure"`
			}
			if ev.Type == protocol.EvtWorkOfferAccepted && json.Unmarshal(ev.Payload, &p) == nil && p.ScheduleDisclosure != nil {
				d = p.ScheduleDisclosure
				return true
			}
		}
		return false
	}, tw)
	if d.Confidence <= 0 || d.EstimatedCompletion.Time.Sub(d.EstimatedStartWindow.To.Time) != 10*time.Minute {
		t.Fatalf("first disclosure in a new Group %+v: want a confidence and the capability's observed 10 minutes", d)
	}
}
