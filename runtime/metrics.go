package runtime

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// metrics are the worker's Prometheus series (docs/operations.md). The
// counters are kept as things happen; the gauges are read from Status and
// the store when scraped.
type metrics struct {
	events      *prometheus.CounterVec // result: applied, duplicate, buffered, dropped, rejected
	runs        *prometheus.CounterVec // outcome
	runsStarted prometheus.Counter
	retries     *prometheus.CounterVec // capability
	// uninterpreted events were applied (cursor past them) but the view
	// could not read their payload.
	uninterpreted prometheus.Counter
	preemptions   *prometheus.CounterVec // reason
	renewals      *prometheus.CounterVec // result: renewed, refused
	fenced        *prometheus.CounterVec // code
	commands      *prometheus.CounterVec // type, result
	awaiting      prometheus.Gauge       // commands sent, not yet answered
	commandTime   *prometheus.HistogramVec
	reconnects    prometheus.Counter
	offlineSince  time.Time
}

func newMetrics() *metrics {
	return &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mwp_worker_events_total",
			Help: "Events received from the authority, by what the store did with them: applied, duplicate, buffered (held beyond a gap), dropped (past the buffer's bounds), rejected.",
		}, []string{"result"}),
		runsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mwp_worker_runs_started_total",
			Help: "Runs started in a slot under an execution lease.",
		}),
		uninterpreted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mwp_worker_events_uninterpreted_total",
			Help: "Events applied (stored, the cursor past them) whose payload the worker's view could not interpret and ignored; each is logged at WARN.",
		}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mwp_worker_run_retries_total",
			Help: "Failed handler attempts the contract's retry policy ran again within the same lease, by the handler's capability.",
		}, []string{"capability"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mwp_worker_runs_finished_total",
			Help: "Runs ended, by outcome (completed, failed, blocked, preempted, lease-lost).",
		}, []string{"outcome"}),
		preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mwp_worker_preemptions_requested_total",
			Help: "Safe-point stops asked of a running slot, by reason (scheduler, offline-grace, shutdown).",
		}, []string{"reason"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mwp_worker_lease_renewals_total",
			Help: "Execution lease renewals answered by the authority, by result (renewed, refused).",
		}, []string{"result"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mwp_worker_fencing_refusals_total",
			Help: "Commands refused because the worker no longer held the item (stale ownership, lapsed lease, forbidden), by code.",
		}, []string{"code"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mwp_worker_commands_total",
			Help: "Commands the worker sent and the authority answered, by type and result: accepted, or the error code.",
		}, []string{"type", "result"}),
		awaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mwp_worker_commands_awaiting_answer",
			Help: "Commands sent that the authority has not answered yet. Zero means mwp_worker_commands_total counts every answer received.",
		}),
		commandTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mwp_worker_command_seconds",
			Help:    "Round trip of one command, from its send to the authority's answer (after its fsync).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"type"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mwp_worker_connections_total",
			Help: "Connections to the authority that completed HELLO (the first and every reconnect).",
		}),
	}
}

func (m *metrics) applied(res queue.Result) {
	m.events.WithLabelValues("applied").Add(float64(len(res.Applied)))
	m.events.WithLabelValues("duplicate").Add(float64(len(res.Duplicates)))
	m.events.WithLabelValues("buffered").Add(float64(len(res.Buffered)))
	m.events.WithLabelValues("dropped").Add(float64(len(res.Dropped)))
	m.events.WithLabelValues("rejected").Add(float64(len(res.Rejected)))
	m.uninterpreted.Add(float64(len(res.Problems)))
}

// sending is called before a command goes out, sent when its answer (or
// its loss) comes back: the count goes up before the gauge goes down, so a
// reader that sees the gauge at zero sees every answer counted.
func (m *metrics) sending() { m.awaiting.Inc() }

func (m *metrics) sent(typ protocol.CommandType, took time.Duration, err error) {
	t, result := protocol.MetricLabel(typ), protocol.MetricResult(err)
	m.commands.WithLabelValues(t, result).Inc()
	m.awaiting.Dec()
	// Only an answer has a round trip: a connection lost on the way has none.
	if result != "transport" {
		m.commandTime.WithLabelValues(t).Observe(took.Seconds())
	}
}

// Collectors are the worker's metrics, for the process's registry.
func (w *Worker) Collectors() []prometheus.Collector {
	m := w.m
	return []prometheus.Collector{m.events, m.uninterpreted, m.runsStarted, m.retries, m.runs, m.preemptions, m.renewals, m.fenced, m.commands, m.awaiting, m.commandTime, m.reconnects, statusCollector{w}}
}

// statusCollector reads the gauges from the worker's status and store.
type statusCollector struct{ w *Worker }

var (
	descSlots      = prometheus.NewDesc("mwp_worker_slots", "Execution slots, by state (busy, free).", []string{"state"}, nil)
	descQueued     = prometheus.NewDesc("mwp_worker_scheduler_queued", "Items waiting in the global scheduler.", nil, nil)
	descItems      = prometheus.NewDesc("mwp_worker_queue_items", "WorkItems in the worker's view of a Group's log, by state.", []string{"group", "state"}, nil)
	descCursor     = prometheus.NewDesc("mwp_worker_group_cursor", "The Group's durable cursor: the highest sequence applied without a gap.", []string{"group"}, nil)
	descGap        = prometheus.NewDesc("mwp_worker_group_buffered_events", "Events of the Group held beyond a gap, waiting for the missing ones.", []string{"group"}, nil)
	descDiverged   = prometheus.NewDesc("mwp_worker_group_diverged", "1 when the Group's authority contradicted an applied event (see mwp-worker resync).", []string{"group"}, nil)
	descConnected  = prometheus.NewDesc("mwp_worker_connected", "1 while connected to the authority.", nil, nil)
	descOnline     = prometheus.NewDesc("mwp_worker_online", "1 while online and reconciled; 0 while offline or reconciling (no new starts).", nil, nil)
	descOfflineFor = prometheus.NewDesc("mwp_worker_offline_seconds", "How long the worker has been offline now (0 when online).", nil, nil)
	descBuffered   = prometheus.NewDesc("mwp_worker_offline_buffered_commands", "Signed commands in the offline buffer, waiting for reconciliation.", nil, nil)
	descSession    = prometheus.NewDesc("mwp_worker_session_epoch", "The agent's current session epoch (0 before the first session).", nil, nil)
	descGroupBusy  = prometheus.NewDesc("mwp_worker_group_busy_slots", "Execution slots running a WorkItem of the Group: its share of the busy slots is the fair-share scheduler at work.", []string{"group"}, nil)
)

func (statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSlots, descQueued, descItems, descCursor, descGap, descDiverged, descConnected, descOnline, descOfflineFor, descBuffered, descSession, descGroupBusy} {
		ch <- d
	}
}

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.w.Status()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descSlots, float64(st.Slots-st.FreeSlots), "busy")
	gauge(descSlots, float64(st.FreeSlots), "free")
	gauge(descQueued, float64(st.Queued))
	gauge(descConnected, b2f(st.Connection == "connected"))
	gauge(descOnline, b2f(st.Offline == "online"))
	gauge(descBuffered, float64(st.Buffered))
	gauge(descSession, float64(st.SessionEpoch))
	offlineFor := 0.0
	if since := c.w.offlineSince(); !since.IsZero() {
		offlineFor = c.w.cfg.Clock.Now().Sub(since).Seconds()
	}
	gauge(descOfflineFor, offlineFor)
	store := c.w.liveStore()
	held := map[string]int{}
	if store != nil {
		for _, b := range store.Buffers() {
			held[b.GroupID] = b.Events
		}
	}
	busy := map[string]int{}
	for _, r := range st.Running {
		busy[r.GroupID]++
	}
	for _, g := range st.Groups {
		gauge(descGroupBusy, float64(busy[g.GroupID]), g.GroupID)
		gauge(descCursor, float64(g.Cursor), g.GroupID)
		gauge(descGap, float64(held[g.GroupID]), g.GroupID)
		if store == nil {
			continue
		}
		_, diverged := store.Divergence(g.GroupID)
		gauge(descDiverged, b2f(diverged), g.GroupID)
		byState := map[protocol.WorkItemState]int{}
		for _, e := range store.Items(g.GroupID) {
			byState[e.State]++
		}
		for s, n := range byState {
			gauge(descItems, float64(n), g.GroupID, string(s))
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Live reports whether the worker can do its job at all: Run is active and
// its store is open (the process's /healthz).
func (w *Worker) Live() error {
	if w.liveStore() == nil {
		if st := w.Status(); st.LastError != "" {
			return fmt.Errorf("worker stopped: %s", st.LastError)
		}
		return errors.New("worker store not open")
	}
	return nil
}

// Ready reports whether the worker is doing its job now: a session open,
// connected, online and reconciled, every Group it was asked to follow
// received, and none held on a gap or diverged (the process's /readyz).
func (w *Worker) Ready() error {
	if err := w.Live(); err != nil {
		return err
	}
	st := w.Status()
	switch {
	case st.SessionEpoch == 0:
		return errors.New("no session yet")
	case st.Connection != "connected":
		return fmt.Errorf("not connected (%s)", st.Connection)
	case st.Offline != "online":
		return fmt.Errorf("not online (%s)", st.Offline)
	}
	store := w.liveStore()
	if store == nil {
		return errors.New("worker store not open")
	}
	for _, b := range store.Buffers() {
		if b.Events > 0 {
			return fmt.Errorf("group %s waits on a gap after sequence %d", b.GroupID, b.Cursor)
		}
	}
	for _, g := range st.Groups {
		if d, diverged := store.Divergence(g.GroupID); diverged {
			return fmt.Errorf("group %s diverged at sequence %d (%s): resync it", g.GroupID, d.Sequence, d.Describe())
		}
	}
	w.mu.Lock()
	follow := append(slices.Clone(w.cfg.Groups), w.added...)
	w.mu.Unlock()
	for _, g := range follow {
		if store.Cursor(g) == 0 {
			return fmt.Errorf("group %s: nothing received yet (not a member?)", g)
		}
	}
	return nil
}
