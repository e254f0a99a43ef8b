package coordinator

import (
	"context"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// Stats follow a Mission through a failed check and its retry to
// approval: stages by state from the log, the retry told from a re-offer,
// reviews and checks by result.
func TestStatsFollowTheMission(t *testing.T) {
	p := parsePlan(t, reviewedPlan)
	r := newRig(t, p)
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	cfg := r.coordinator("c1", "w1")
	var mu sync.Mutex
	runs := 0
	cfg.RunCheck = func(context.Context, CheckRun) (CheckResult, error) {
		mu.Lock()
		defer mu.Unlock()
		runs++
		return CheckResult{ExitCode: map[bool]int{true: 1}[runs == 1]}, nil
	}
	c, errc := r.launch(ctx, cfg, r.worker("w1", capsOf(p), nil))
	if s := c.Stats(); s.MissionID != "mis-r" || s.Mission != "" && s.Mission != protocol.MissionActive {
		t.Fatalf("before the Mission: %+v", s)
	}
	go r.approve(ctx)
	r.waitMission(protocol.MissionApproved, errc)
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	s := c.Stats()
	if s.Mission != protocol.MissionApproved || s.Stages[protocol.WorkVerified] != 2 || len(s.Stages) != 1 {
		t.Fatalf("mission %s, stages %v", s.Mission, s.Stages)
	}
	if s.Retries != 1 || s.Reoffers != 0 {
		t.Fatalf("retries %d, re-offers %d; want the one retry of draft", s.Retries, s.Reoffers)
	}
	if s.Reviews[ResultRejected] != 1 || s.Reviews[ResultAccepted] != 2 {
		t.Fatalf("reviews %v: want draft rejected once, then both stages accepted", s.Reviews)
	}
	mu.Lock()
	defer mu.Unlock()
	if s.Checks[ResultFailed] != 1 || s.Checks[ResultPassed] != uint64(runs-1) {
		t.Fatalf("checks %v: want lint failed once, then passed on its %d other runs", s.Checks, runs-1)
	}
}
