package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// A live work.offer.created whose offer has already expired on the
// worker's clock is refused by admission, not accepted: the expiry reaches
// the worker's view from the authority's own payload (offerExpiresAt).
// The authority's clock runs 90 s behind the worker's (inside the allowed
// skew), so the offer, made to expire 60 s after the authority's now, is
// still open there: only the worker's own check can refuse it.
func TestWorkerRefusesLiveExpiredOffer(t *testing.T) {
	k := newWKit(t)
	cfg := k.workerConfig("w1", t.TempDir(), newStepHandler(1), 1)
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.ac.skew.Store(int64(-90 * time.Second))

	now := k.ac.Now()
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-1", MissionID: "mis-a", Contract: contractFor("wi-1", protocol.UrgencyNormal, now)})
	k.offerUntil("wi-1", "off-1", now.Add(time.Minute), "w1")

	st := k.waitFor("wi-1 judged", func(s WorkerStatus) bool { _, ok := admissionOf(s, "wi-1"); return ok }, tw)
	adm, _ := admissionOf(st, "wi-1")
	if adm.Accepted || adm.Rejection == nil || adm.Rejection.Reason != protocol.RejectAuthorization || !strings.Contains(adm.Rejection.Detail, "expired") {
		t.Fatalf("admission of an expired offer: %+v", adm)
	}
	k.caughtUp(tw)
	if s := k.state("wi-1"); s != protocol.WorkOffered {
		t.Fatalf("wi-1 is %s at the authority, want still offered", s)
	}
}
