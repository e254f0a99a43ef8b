package coordinator

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// TestContextPackagesPublished: running a plan with dependencies, the
// coordinator publishes a Context Package for every stage before its
// offer, the authority accepts each one, and each says what the log says:
// the accepted artifacts of its prerequisites and the events that
// accepted them, signed by the coordinator, every later version chained
// to the one before.
func TestContextPackagesPublished(t *testing.T) {
	r := newRig(t, mustPlan(t, "../examples/plans/bugfix.yaml"))
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	caps := capsOf(r.plan)
	workers := []*fakeWorker{r.worker("w1", caps, nil), r.worker("w2", caps, nil)}
	cfg := r.coordinator("c1", "w1", "w2")
	rec := &recorder{Authority: cfg.Authority}
	cfg.Authority = rec
	_, errc := r.launch(ctx, cfg, workers...)
	go r.approve(ctx)
	r.waitMission(protocol.MissionApproved, errc)
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, e := range rec.refused {
		t.Errorf("refused: %v", e)
	}

	g := r.plan.Mission.GroupID
	evs, err := r.svc.Events(g, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := protocol.NewKeySet(cfg.Key.Public())
	accepted := map[string]string{}    // WorkItem → eventId of its work.result.accepted
	artifacts := map[string][]string{} // WorkItem → artifacts of its accepted submission
	submitted := map[string][]string{}
	heads := map[string]protocol.ContextPackage{}
	for _, se := range evs {
		var ev protocol.Event
		if err := json.Unmarshal(se.Raw, &ev); err != nil {
			t.Fatal(err)
		}
		p, err := group.Decode(ev.Type, ev.Payload)
		if err != nil {
			continue
		}
		switch p := p.(type) {
		case *group.Submitted:
			submitted[p.WorkItemID] = p.Artifacts
		case *group.ResultAccepted:
			accepted[p.WorkItemID], artifacts[p.WorkItemID] = ev.EventID, submitted[p.WorkItemID]
		case *group.ContextPublished:
			pkg := p.Package
			if err := protocol.VerifyContextPackage(pkg, keys); err != nil {
				t.Errorf("%s v%d: %v", pkg.PackageID, pkg.Version, err)
			}
			if pkg.SourceEvents.ToSequence >= ev.Seq() || pkg.Scope.MissionID != r.plan.Mission.ID {
				t.Errorf("%s v%d cites %+v in scope %+v, published at %d", pkg.PackageID, pkg.Version, pkg.SourceEvents, pkg.Scope, ev.Seq())
			}
			if prev, ok := heads[pkg.PackageID]; ok {
				d, _ := protocol.ContextDigest(prev)
				if pkg.PreviousVersion == nil || pkg.PreviousVersion.Digest != d || pkg.Version != prev.Version+1 {
					t.Errorf("%s v%d does not chain to v%d", pkg.PackageID, pkg.Version, prev.Version)
				}
			}
			heads[pkg.PackageID] = pkg
			w, _ := r.svc.WorkItem(g, pkg.Scope.WorkItemID)
			var wantArts, wantEvents []string
			for _, d := range w.Contract.Dependencies {
				if id, ok := accepted[d.WorkItemID]; ok {
					wantEvents = append(wantEvents, id)
					wantArts = append(wantArts, artifacts[d.WorkItemID]...)
				}
			}
			slices.Sort(wantArts)
			wantArts = slices.Compact(wantArts)
			var gotEvents []string
			for _, d := range pkg.Decisions {
				gotEvents = append(gotEvents, d.EventIDs...)
			}
			if !slices.Equal(gotEvents, wantEvents) || !slices.Equal([]string(pkg.Artifacts), wantArts) {
				t.Errorf("%s v%d cites %v and %v, want %v and %v", pkg.PackageID, pkg.Version, gotEvents, pkg.Artifacts, wantEvents, wantArts)
			}
		}
	}
	for _, s := range r.plan.Stages {
		if _, ok := heads[contextID(s.WorkItemID)]; !ok {
			t.Errorf("stage %s got no context package", s.ID)
		}
	}
}
