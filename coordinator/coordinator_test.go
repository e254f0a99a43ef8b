package coordinator

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// Every example plan runs to approved: the coordinator adds the workers,
// authorizes the stages, offers, reviews and submits for approval; the
// human grants the pre-execution approvals the plan asks for and approves.
func TestExamplePlansReachApproved(t *testing.T) {
	files, err := filepath.Glob("../examples/plans/*")
	if err != nil || len(files) < 2 {
		t.Fatalf("example plans: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := newRig(t, mustPlan(t, f))
			ctx, cancel := context.WithCancel(r.ctx)
			defer cancel()
			caps := capsOf(r.plan)
			workers := []*fakeWorker{r.worker("w1", caps, nil), r.worker("w2", caps, nil)}
			cfg := r.coordinator("c1", "w1", "w2")
			_, errc := r.launch(ctx, cfg, workers...)
			go r.approve(ctx)
			r.waitMission(protocol.MissionApproved, errc)
			if err := <-errc; err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}
