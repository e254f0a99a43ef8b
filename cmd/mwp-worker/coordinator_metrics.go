package main

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	plancoord "github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/protocol"
)

// What `coordinator run --metrics-listen` serves besides the Go runtime's:
// its Missions, their stages, the reviews and checks it decided and the
// offers it made again (docs/operations.md, "Metrics").
var (
	descCoordMissions = prometheus.NewDesc("mwp_coordinator_missions", "Missions this coordinator coordinates, by state (pending: not created yet).", []string{"state"}, nil)
	descCoordStages   = prometheus.NewDesc("mwp_coordinator_stages", "The plan's stages (WorkItems), by Mission and state; stages not yet authorized are not counted.", []string{"mission", "state"}, nil)
	descCoordReviews  = prometheus.NewDesc("mwp_coordinator_reviews_total", "Reviews of submissions decided by this process, by result (accepted, rejected, waiting: the reviewer stage's verdict has not come).", []string{"mission", "result"}, nil)
	descCoordChecks   = prometheus.NewDesc("mwp_coordinator_checks_total", "The plan's deterministic checks run by this process, by result (passed, failed).", []string{"mission", "result"}, nil)
	descCoordReoffers = prometheus.NewDesc("mwp_coordinator_reoffers_total", "Offers of a stage after its first that did not follow a failure (expired, declined, or an owner that lapsed), from the log.", []string{"mission"}, nil)
	descCoordRetries  = prometheus.NewDesc("mwp_coordinator_retries_total", "Offers of a stage after a failure, within its retry policy, from the log.", []string{"mission"}, nil)
)

var (
	missionStates = []protocol.MissionState{"", protocol.MissionActive, protocol.MissionAwaitingApproval, protocol.MissionApproved, protocol.MissionCancelled, protocol.MissionTerminated}
	stageStates   = []protocol.WorkItemState{protocol.WorkOpen, protocol.WorkOffered, protocol.WorkQueued, protocol.WorkActive, protocol.WorkBlocked,
		protocol.WorkSubmitted, protocol.WorkVerified, protocol.WorkFailed, protocol.WorkCancelled}
	reviewResults = []string{plancoord.ResultAccepted, plancoord.ResultRejected, plancoord.ResultWaiting}
	checkResults  = []string{plancoord.ResultPassed, plancoord.ResultFailed}
)

// coordinatorMetrics collects the figures of a process's coordinators.
type coordinatorMetrics struct{ coords []*plancoord.Coordinator }

func (m coordinatorMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCoordMissions, descCoordStages, descCoordReviews, descCoordChecks, descCoordReoffers, descCoordRetries} {
		ch <- d
	}
}

func (m coordinatorMetrics) Collect(ch chan<- prometheus.Metric) {
	missions := map[protocol.MissionState]int{}
	for _, c := range m.coords {
		s := c.Stats()
		missions[s.Mission]++
		for _, st := range stageStates {
			ch <- prometheus.MustNewConstMetric(descCoordStages, prometheus.GaugeValue, float64(s.Stages[st]), s.MissionID, string(st))
		}
		for _, r := range reviewResults {
			ch <- prometheus.MustNewConstMetric(descCoordReviews, prometheus.CounterValue, float64(s.Reviews[r]), s.MissionID, r)
		}
		for _, r := range checkResults {
			ch <- prometheus.MustNewConstMetric(descCoordChecks, prometheus.CounterValue, float64(s.Checks[r]), s.MissionID, r)
		}
		ch <- prometheus.MustNewConstMetric(descCoordReoffers, prometheus.CounterValue, float64(s.Reoffers), s.MissionID)
		ch <- prometheus.MustNewConstMetric(descCoordRetries, prometheus.CounterValue, float64(s.Retries), s.MissionID)
	}
	for _, st := range missionStates {
		name := string(st)
		if st == "" {
			name = "pending"
		}
		ch <- prometheus.MustNewConstMetric(descCoordMissions, prometheus.GaugeValue, float64(missions[st]), name)
	}
}

// coordinatorReady is `coordinator run`'s /readyz: connected and able to
// serve. The session is open before the listener starts; a coordinator
// whose last round failed (the authority unreachable or refusing) makes
// it not ready. Waiting for a Mission to name it is idle, not unready.
// reachability is whether coordinator run's requests reach the
// authority: not from a request's first failed try, while it waits the
// outage out, until a request that waited gets its answer. Several
// requests wait at once in an outage; it changes once each way, so the
// log says once that the authority went away and once that it is back.
type reachability struct {
	mu   sync.Mutex
	down error // the failure that began the outage; nil: reachable
}

// waiting records a failed try; true when it begins an outage.
func (r *reachability) waiting(err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.down == nil
	if first {
		r.down = err
	}
	return first
}

// reached records an answer after a wait; true when it ends an outage.
func (r *reachability) reached() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.down != nil
	r.down = nil
	return was
}

// ready is /readyz's part: not ready while the authority is unreachable.
func (r *reachability) ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return fmt.Errorf("the authority is unreachable: %w", r.down)
	}
	return nil
}

func coordinatorReady(coords []*plancoord.Coordinator) func() error {
	return func() error {
		var errs []error
		for _, c := range coords {
			if s := c.Stats(); s.Failing != nil {
				errs = append(errs, fmt.Errorf("mission %s: %w", s.MissionID, s.Failing))
			}
		}
		return errors.Join(errs...)
	}
}
