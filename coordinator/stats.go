package coordinator

import (
	"maps"
	"strings"

	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// Stats is what an operator's metrics show of one coordinator: where its
// Mission and stages stand and what its reviews decided. The Mission,
// stage and offer figures are read from the log, so a restarted
// coordinator shows the same; reviews and checks count this process's.
type Stats struct {
	MissionID string
	// Mission is the Mission's state ("" before its creation).
	Mission protocol.MissionState
	// Stages counts the plan's WorkItems by state.
	Stages map[protocol.WorkItemState]int
	// Reoffers counts offers of an item after its first that did not
	// follow a failure (an offer that expired, was declined, or an owner
	// that lapsed); Retries those that followed a failure.
	Reoffers, Retries uint64
	// Reviews counts decided reviews by result: accepted, rejected,
	// waiting (the reviewer stage's verdict has not come).
	Reviews map[string]uint64
	// Checks counts the plan's deterministic checks run by result:
	// passed, failed.
	Checks map[string]uint64
	// Failing is the error of Run's last round when it failed (the
	// authority unreachable or refusing), nil once a round went through.
	Failing error
}

// The results Stats counts reviews and checks by.
const (
	ResultAccepted = "accepted"
	ResultRejected = "rejected"
	ResultWaiting  = "waiting"
	ResultPassed   = "passed"
	ResultFailed   = "failed"
)

// Stats is a copy of the coordinator's figures; safe while Run runs.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.MissionID = c.cfg.Plan.Mission.ID
	s.Stages, s.Reviews, s.Checks = maps.Clone(s.Stages), maps.Clone(s.Reviews), maps.Clone(s.Checks)
	return s
}

// logStatsLocked refreshes the figures read from the view; Run's
// goroutine calls it (with c.mu held) after folding new events.
func (c *Coordinator) logStatsLocked() {
	s := &c.stats
	s.Mission = c.v.missionState()
	s.Stages = map[protocol.WorkItemState]int{}
	s.Reoffers, s.Retries = 0, 0
	for _, st := range c.cfg.Plan.Stages {
		w := c.v.g.Items[st.WorkItemID]
		if w == nil {
			continue
		}
		s.Stages[w.State]++
		l := c.v.item(st.WorkItemID)
		again := uint64(max(l.offers-1, 0))
		retries := min(uint64(l.failures), again)
		s.Retries += retries
		s.Reoffers += again - retries
	}
}

// countReview adds a decided review of stage st to the figures.
func (c *Coordinator) countReview(st *plan.Stage, r Review) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.stats
	if s.Reviews == nil {
		s.Reviews, s.Checks = map[string]uint64{}, map[string]uint64{}
	}
	switch {
	case r.Waiting:
		s.Reviews[ResultWaiting]++
	case r.Accepted:
		s.Reviews[ResultAccepted]++
	default:
		s.Reviews[ResultRejected]++
	}
	for _, step := range r.Steps {
		if step.Name != StepChecks || st == nil {
			continue
		}
		for _, ch := range st.Checks {
			failed := false
			for _, p := range step.Problems {
				failed = failed || strings.HasPrefix(p, "check "+ch.Name+" ") || strings.HasPrefix(p, "check "+ch.Name+":")
			}
			if failed {
				s.Checks[ResultFailed]++
			} else {
				s.Checks[ResultPassed]++
			}
		}
	}
}

// setFailing records how Run's last round ended.
func (c *Coordinator) setFailing(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Failing = err
}
