package runtime

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	lc "github.com/missionweave/mwp-worker/runtime/item"
)

// renewalKit is a one-slot worker running wi-1 (held by the step handler)
// with wi-2 accepted and queued behind it.
func renewalKit(t *testing.T) (*wkit, *stepHandler, *testWorker) {
	k := newWKit(t)
	h := newStepHandler(2)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.waitFor("wi-1 running", runningAll("wi-1"), tw)
	k.offer("wi-2", protocol.UrgencyNormal, "w1")
	k.until("wi-2 accepted", func() bool { return k.state("wi-2") == protocol.WorkQueued }, tw)
	return k, h, tw
}

func (k *wkit) insertDependency(id string, on string, policy protocol.DependencyPolicy) {
	k.t.Helper()
	k.ok(k.coord, protocol.CmdDependencyInsert, &protocol.InsertDependencyPayload{WorkItemID: id,
		ContractRevision: k.item(id).Contract.Revision + 1, Dependencies: protocol.List[protocol.Dependency]{{WorkItemID: on, Policy: policy}}})
}

// A dependency inserted on an owned, queued item revises its contract
// substantially (spec 10.1): the worker judges it again, renews its
// acceptance, and starts the item once the new dependency is met.
func TestWorkerRenewsAcceptanceAfterRevision(t *testing.T) {
	k, h, tw := renewalKit(t)
	k.insertDependency("wi-2", "wi-1", protocol.DependencyVerified)
	k.until("renewed acceptance recorded", func() bool { return k.item("wi-2").Contract.Revision == 2 && acceptedRevision(k, "wi-2") == 2 }, tw)
	st := tw.w.Status()
	adm, _ := admissionOf(st, "wi-2")
	if !adm.Renewal || !adm.Accepted || adm.ContractRevision != 2 || adm.Basis.PolicyRulesApplied[0] != lc.RuleAdmitOwnership {
		t.Fatalf("last admission of wi-2: %+v", adm)
	}

	h.release("wi-1")
	k.until("wi-1 submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)
	k.ok(k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: "wi-1", ContractRevision: 1})
	k.waitFor("wi-2 running after its renewal and its dependency", runningAll("wi-2"), tw)

	tr := k.trace()
	renewed := hasLine(tr, "work.contract.revised wi-2")
	started := hasLine(tr, "work.started wi-2 by w1")
	if renewed < 0 || started < renewed || strings.Count(strings.Join(tr, "\n"), "work.offer.accepted wi-2 by w1") != 2 {
		t.Fatalf("want a revision, a second acceptance, then the start:\n%s", strings.Join(tr, "\n"))
	}
	for _, ev := range k.events() {
		if ev.Type == protocol.EvtWorkStarted && ev.Aggregate.ID == "wi-2" {
			return
		}
		if ev.Type == protocol.EvtWorkOfferAccepted && ev.Aggregate.ID == "wi-2" {
			var p struct {
				Renewed  bool   `json:"renewedAcceptance"`
				Revision uint64 `json:"contractRevision"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			if p.Revision == 2 && !p.Renewed {
				t.Fatalf("acceptance of revision 2 is not a renewal: %s", ev.Payload)
			}
		}
	}
}

// A revision the worker cannot meet (a dependency on a cancelled item
// whose policy needs it verified) is refused by its admission control; it
// releases the item with work.fail naming the refusal, and posts the
// structured refusal to the item's conversation.
func TestWorkerReleasesItemWhoseRevisionItRefuses(t *testing.T) {
	k, _, tw := renewalKit(t)
	now := k.ac.Now()
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-0", MissionID: "mis-a", Contract: contractFor("wi-0", protocol.UrgencyNormal, now)})
	k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: "wi-0", Reason: "dropped"})
	k.insertDependency("wi-2", "wi-0", protocol.DependencyVerified)
	// Wait for the judgement of revision 2, whichever it is, so that an
	// acceptance fails here at once rather than by the wait's timeout.
	st := k.waitFor("revision 2 of wi-2 judged", func(s WorkerStatus) bool {
		adm, ok := admissionOf(s, "wi-2")
		return ok && adm.ContractRevision == 2
	}, tw)
	if adm, _ := admissionOf(st, "wi-2"); adm.Accepted {
		t.Fatalf("revision 2 of wi-2 accepted: %+v", adm)
	}
	k.until("wi-2 released", func() bool { return k.state("wi-2") == protocol.WorkFailed }, tw)
	k.until("refusal notice posted", func() bool {
		for _, ev := range k.events() {
			if ev.Type == protocol.EvtMessagePosted && strings.Contains(string(ev.Payload), `\"contractRevision\":2`) {
				return true
			}
		}
		return false
	}, tw)
	k.caughtUp(tw)

	adm, _ := admissionOf(tw.w.Status(), "wi-2")
	if !adm.Renewal || adm.Accepted || adm.Rejection == nil || adm.Rejection.Reason != protocol.RejectDependency || adm.ContractRevision != 2 {
		t.Fatalf("last admission of wi-2: %+v", adm)
	}
	var failed, notice string
	for _, ev := range k.events() {
		switch {
		case ev.Type == protocol.EvtWorkFailed && ev.Aggregate.ID == "wi-2":
			failed = string(ev.Payload)
			if ev.Actor.ID != "w1" {
				t.Fatalf("wi-2 failed by %s", ev.Actor.ID)
			}
		case ev.Type == protocol.EvtMessagePosted && strings.Contains(string(ev.Payload), `\"contractRevision\":2`):
			notice = string(ev.Payload)
		}
	}
	if !strings.Contains(failed, "(dependency)") || !strings.Contains(failed, "wi-0") {
		t.Fatalf("work.failed payload does not name the refusal: %s", failed)
	}
	if !strings.Contains(notice, `\"reason\":\"dependency\"`) || !strings.Contains(notice, `\"workItemId\":\"wi-2\"`) {
		t.Fatalf("refusal notice: %q", notice)
	}
	// The slot and the running item are untouched.
	if st := tw.w.Status(); !runningAll("wi-1")(st) {
		t.Fatalf("wi-1 no longer running: %+v", st.Running)
	}
}

func acceptedRevision(k *wkit, id string) uint64 { return k.item(id).AcceptedRevision }
