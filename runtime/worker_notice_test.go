package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/scheduler"
)

// postedMsg is a message.posted event of the Group log.
type postedMsg struct {
	Actor          string
	MessageID      string `json:"messageId"`
	ConversationID string `json:"conversationId"`
	Text           string `json:"text"`
	MediaType      string `json:"mediaType"`
}

// messages returns the messages posted about one WorkItem (its
// conversation), or all of them for "".
func (k *wkit) messages(conv string) []postedMsg {
	k.t.Helper()
	var out []postedMsg
	for _, ev := range k.events() {
		if ev.Type != protocol.EvtMessagePosted {
			continue
		}
		var m postedMsg
		if err := json.Unmarshal(ev.Payload, &m); err != nil {
			k.t.Fatal(err)
		}
		m.Actor = ev.Actor.ID
		if conv == "" || m.ConversationID == conv {
			out = append(out, m)
		}
	}
	return out
}

// noticesOf lists the Status notices of one item and kind.
func noticesOf(s WorkerStatus, kind, item string) []NoticeLog {
	var out []NoticeLog
	for _, n := range s.Notices {
		if n.Kind == kind && n.WorkItemID == item {
			out = append(out, n)
		}
	}
	return out
}

func hasNotice(kind, item, state string) func(WorkerStatus) bool {
	return func(s WorkerStatus) bool {
		for _, n := range noticesOf(s, kind, item) {
			if n.State == state {
				return true
			}
		}
		return false
	}
}

func admissionOf(s WorkerStatus, item string) (AdmissionLog, bool) {
	for i := len(s.Admissions) - 1; i >= 0; i-- {
		if s.Admissions[i].WorkItemID == item {
			return s.Admissions[i], true
		}
	}
	return AdmissionLog{}, false
}

// A worker whose one slot and queue are full refuses two offers. The first
// refusal is posted to the Group at once, as a markdown message in the
// item's conversation whose json block is exactly the structured
// rejection; the second waits for the worker's message budget. After a
// restart on the same store the waiting one is posted and the offers,
// judged again, post nothing more: one message per offer.
func TestWorkerRefusalNoticeOncePerOffer(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(3)
	dir := t.TempDir()
	cfg := k.workerConfig("w1", dir, h, 1)
	cfg.QueueDepth, cfg.NoticeBurst, cfg.NoticeEvery = 1, 1, time.Hour
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-1 running", runningAll("wi-1"), tw)

	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	k.until("refusal of wi-2 posted", func() bool { return len(k.messages("wi-2")) > 0 }, tw)
	st := k.waitFor("wi-2 notice settled", hasNotice(NoticeRejection, "wi-2", noticePosted), tw)
	adm, ok := admissionOf(st, "wi-2")
	if !ok || adm.Accepted || adm.Rejection == nil || adm.Rejection.Reason != protocol.RejectCapacity {
		t.Fatalf("admission of wi-2: %+v", adm)
	}
	msgs := k.messages("wi-2")
	wantID, _ := noticeIDs("w1", "grp-a", NoticeRejection, "off-wi-2")
	if len(msgs) != 1 || msgs[0].Actor != "w1" || msgs[0].MediaType != "text/markdown" || msgs[0].MessageID != wantID {
		t.Fatalf("messages about wi-2: %+v", msgs)
	}
	line, block := noticeObject(t, msgs[0].Text)
	want, err := protocol.Marshal(RejectionNotice{Kind: NoticeRejection, GroupID: "grp-a", WorkItemID: "wi-2", OfferID: "off-wi-2",
		Reason: adm.Rejection.Reason, Detail: adm.Rejection.Detail})
	if err != nil {
		t.Fatal(err)
	}
	if string(block) != string(want) {
		t.Fatalf("json block %s, want %s", block, want)
	}
	if wantLine := "Offer off-wi-2 for wi-2 refused: capacity — " + adm.Rejection.Detail; line != wantLine {
		t.Fatalf("line %q, want %q", line, wantLine)
	}

	// The budget (one message an hour) holds the second notice back.
	k.offer("wi-3", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-3 notice pending", hasNotice(NoticeRejection, "wi-3", noticePending), tw)
	if n := len(k.messages("")); n != 1 {
		t.Fatalf("%d messages while the budget is spent", n)
	}
	if err := tw.stop(t); err != nil {
		t.Fatal(err)
	}

	tw2 := k.start(cfg)
	k.until("pending notice of wi-3 posted after the restart", func() bool { return len(k.messages("wi-3")) == 1 }, tw2)
	st = k.waitFor("both offers judged again", func(s WorkerStatus) bool {
		return hasNotice(NoticeRejection, "wi-2", noticeSkipped)(s) && hasNotice(NoticeRejection, "wi-3", noticeSkipped)(s) &&
			hasNotice(NoticeRejection, "wi-3", noticePosted)(s)
	}, tw2)
	k.caughtUp(tw2)
	if n2, n3, all := len(k.messages("wi-2")), len(k.messages("wi-3")), len(k.messages("")); n2 != 1 || n3 != 1 || all != 2 {
		t.Fatalf("after the restart: %d messages about wi-2, %d about wi-3, %d in all; want 1, 1, 2", n2, n3, all)
	}
	if st.LastError != "" {
		t.Fatalf("worker error %s", st.LastError)
	}
}

// A queued accepted item's disclosure is compared after each scheduling
// decision with the one last published (first in work.accept_offer). A
// low-urgency arrival behind it changes nothing: no message. A
// high-urgency arrival ahead of it moves its start by a whole estimate:
// one update. A second such arrival within the threshold waits, and is
// posted once the threshold has passed.
func TestWorkerDisclosureUpdates(t *testing.T) {
	k := newWKitLease(t, 10*time.Minute)
	h := newStepHandler(3)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1) // Estimate 10 min
	cfg.QueueDepth = 8
	// Aging far enough out that no arrival becomes overdue (which would
	// preempt wi-1) during the test.
	cfg.Scheduler.MaxWait = [4]time.Duration{scheduler.UrgencyLow: 2 * time.Hour, scheduler.UrgencyNormal: time.Hour,
		scheduler.UrgencyHigh: 10 * time.Minute, scheduler.UrgencyCritical: time.Second}
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-1 running", runningAll("wi-1"), tw)
	t0 := k.fc.Now()
	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	k.until("wi-2 queued", func() bool { return k.state("wi-2") == protocol.WorkQueued }, tw)
	k.fc.Advance(90 * time.Second)

	// Behind wi-2: not material.
	k.offer("wi-4", protocol.UrgencyLow, "w1")
	k.until("wi-4 queued", func() bool { return k.state("wi-4") == protocol.WorkQueued }, tw)
	k.caughtUp(tw)
	if n := len(noticesOf(tw.w.Status(), NoticeDisclosure, "wi-2")); n != 0 {
		t.Fatalf("%d updates of wi-2 for an arrival behind it", n)
	}

	// Ahead of wi-2: its start moves 10 minutes later.
	k.offer("wi-3", protocol.UrgencyHigh, "w1")
	k.until("update of wi-2 posted", func() bool { return len(k.messages("wi-2")) > 0 }, tw)
	msgs := k.messages("wi-2")
	if len(msgs) != 1 {
		t.Fatalf("%d messages about wi-2", len(msgs))
	}
	line, block := noticeObject(t, msgs[0].Text)
	var got DisclosureNotice
	if err := json.Unmarshal(block, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != NoticeDisclosure || got.GroupID != "grp-a" || got.WorkItemID != "wi-2" ||
		!got.EstimatedStartWindow.From.Time.Equal(t0.Add(20*time.Minute)) || got.CapacityState != protocol.CapacitySaturated ||
		!got.ComputedAt.Time.Equal(t0.Add(90*time.Second)) {
		t.Fatalf("update %s", block)
	}
	if !strings.Contains(line, "start later by 10m0s") || strings.Contains(msgs[0].Text, "wi-3") {
		t.Fatalf("line %q (it must not name the item ahead)", line)
	}

	// Another arrival ahead, within the threshold of that update: held.
	k.offer("wi-5", protocol.UrgencyHigh, "w1")
	k.until("wi-5 queued", func() bool { return k.state("wi-5") == protocol.WorkQueued }, tw)
	// wi-6 is offered after wi-5's acceptance is in the log: once its
	// admission shows, the worker has handled that acceptance and re-checked.
	k.offer("wi-6", protocol.UrgencyLow, "w1")
	st := k.waitFor("wi-6 judged", func(s WorkerStatus) bool { _, ok := admissionOf(s, "wi-6"); return ok }, tw)
	if n, m := len(noticesOf(st, NoticeDisclosure, "wi-2")), len(k.messages("wi-2")); n != 1 || m != 1 {
		t.Fatalf("%d updates decided, %d posted about wi-2 within the threshold", n, m)
	}
	k.fc.Advance(61 * time.Second)
	k.until("held update of wi-2 posted", func() bool { return len(k.messages("wi-2")) == 2 }, tw)
	_, block = noticeObject(t, k.messages("wi-2")[1].Text)
	if err := json.Unmarshal(block, &got); err != nil {
		t.Fatal(err)
	}
	if !got.EstimatedStartWindow.From.Time.Equal(t0.Add(30 * time.Minute)) {
		t.Fatalf("second update %s", block)
	}
	for _, m := range k.messages("") {
		if m.ConversationID == "wi-1" {
			t.Fatalf("an update of the running item: %+v", m)
		}
	}
	if st := tw.w.Status(); st.LastError != "" || len(noticesOf(st, NoticeDisclosure, "wi-2")) != 2 {
		t.Fatalf("status %+v", st.Notices)
	}
}

// The authority allows the worker one message an hour. The second refusal
// notice is answered RATE_LIMITED: it is dropped, not retried, and the
// Group's work commands are not held back: the running item is submitted
// and the queued one starts at once, with the clock standing still.
func TestWorkerRateLimitedNoticeDoesNotStall(t *testing.T) {
	k := newWKitWith(t, 2*time.Minute, func(c *embed.Config) { c.RateBurst, c.RateEvery = 1, time.Hour })
	h := newStepHandler(1)
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.QueueDepth = 2
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-1 running", runningAll("wi-1"), tw)
	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	k.until("wi-2 queued", func() bool { return k.state("wi-2") == protocol.WorkQueued }, tw)

	k.offer("wi-3", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-3 notice posted", hasNotice(NoticeRejection, "wi-3", noticePosted), tw)
	k.offer("wi-4", protocol.UrgencyNormal, "w1")
	st := k.waitFor("wi-4 notice dropped", hasNotice(NoticeRejection, "wi-4", noticeDropped), tw)
	if n := noticesOf(st, NoticeRejection, "wi-4"); !strings.Contains(n[0].Err, string(protocol.CodeRateLimited)) {
		t.Fatalf("wi-4 notice %+v", n)
	}

	h.release("wi-1")
	k.until("wi-1 submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
	k.waitFor("wi-2 running", runningAll("wi-2"), tw)
	if n := len(k.messages("")); n != 1 {
		t.Fatalf("%d messages, want the first refusal only", n)
	}
	if st := tw.w.Status(); st.LastError != "" {
		t.Fatalf("worker error %s", st.LastError)
	}
}

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
