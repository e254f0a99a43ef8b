package authoritylite

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/missionweave/mwp-worker/protocol"
)

// metrics are the authority's Prometheus series (docs/operations.md).
type metrics struct {
	commands      *prometheus.CounterVec
	commitBatch   prometheus.Histogram
	commitSeconds prometheus.Histogram
	writeSeconds  prometheus.Histogram
	failedWrites  prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mwp_authority_commands_total",
			Help: "Commands submitted, by type and result: accepted, or the refusal's error code.",
		}, []string{"type", "result"}),
		commitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mwp_authority_commit_batch_commands",
			Help:    "Writes (accepted commands and automatic follow-ups) per log transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mwp_authority_commit_seconds",
			Help:    "Time of one log transaction, from its start to its fsync.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mwp_authority_log_write_seconds",
			Help:    "Time one log transaction spent writing pages and syncing them to disk.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		failedWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mwp_authority_failed_writes_total",
			Help: "Log transactions that failed; after the first the authority refuses everything and exits.",
		}),
	}
}

// command counts one submitted command.
func (m *metrics) command(typ protocol.CommandType, err error) {
	if m == nil {
		return
	}
	t := protocol.MetricLabel(typ)
	result := "accepted"
	if err != nil {
		result = string(protocol.CodeOf(err))
		if result == "" {
			result = string(protocol.CodeInternalError)
		}
	}
	m.commands.WithLabelValues(t, result).Inc()
}

func (m *metrics) commit(batch int, took, wrote time.Duration, err error) {
	if m == nil {
		return
	}
	m.commitBatch.Observe(float64(batch))
	m.commitSeconds.Observe(took.Seconds())
	m.writeSeconds.Observe(wrote.Seconds())
	if err != nil {
		m.failedWrites.Inc()
	}
}

// Collectors are the authority's metrics, for the process's registry: the
// series above and, read when scraped, the Groups and their log heads.
func (s *Service) Collectors() []prometheus.Collector {
	m := s.m
	groups := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mwp_authority_groups",
		Help: "Groups the authority holds.",
	}, func() float64 { return float64(len(s.GroupIDs())) })
	events := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mwp_authority_log_events",
		Help: "Events in every Group's log (the sum of their last sequences).",
	}, func() float64 {
		var n uint64
		for _, id := range s.GroupIDs() {
			n += s.LastSequence(id)
		}
		return float64(n)
	})
	healthy := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mwp_authority_log_writable",
		Help: "1 while writes to the log succeed; 0 after a failed write (the process then exits with status 75).",
	}, func() float64 {
		if s.Err() != nil {
			return 0
		}
		return 1
	})
	return []prometheus.Collector{m.commands, m.commitBatch, m.commitSeconds, m.writeSeconds, m.failedWrites, groups, events, healthy, headCollector{s}, ackCollector{s}}
}

var descGroupHead = prometheus.NewDesc("mwp_authority_group_head",
	"The last sequence of the Group's log; a worker's lag is this minus its mwp_worker_group_cursor.", []string{"group"}, nil)

// headCollector reports every Group's log head when scraped, so a worker's
// cursor lag is one subtraction across the two processes' series.
type headCollector struct{ s *Service }

func (c headCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descGroupHead }

func (c headCollector) Collect(ch chan<- prometheus.Metric) {
	for _, id := range c.s.GroupIDs() {
		ch <- prometheus.MustNewConstMetric(descGroupHead, prometheus.GaugeValue, float64(c.s.LastSequence(id)), id)
	}
}

var descAgentAcked = prometheus.NewDesc("mwp_authority_agent_acked",
	"The highest sequence of the Group an agent has ACKed as durable in its store, since this process started.", []string{"agent", "group"}, nil)

// ackCollector reports the clients' ACKed cursors: what a client has said
// it holds durably, which it must still hold after any crash.
type ackCollector struct{ s *Service }

func (c ackCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descAgentAcked }

func (c ackCollector) Collect(ch chan<- prometheus.Metric) {
	for k, seq := range c.s.AckedCursors() {
		ch <- prometheus.MustNewConstMetric(descAgentAcked, prometheus.GaugeValue, float64(seq), k[0], k[1])
	}
}
