package poc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
)

// What the workers said about themselves, kept for the fault checks: at
// chosen moments of a fault and whenever a worker process stops, the
// driver reads the worker's own Prometheus counters and its status logs
// (offline commands reconciled, preemptions requested) and appends them to
// ObservationsFile. The checks compare two snapshots of one worker (a
// counter's rise between "before" and "after") or read a stopped worker's
// last one; none of it is the driver's account of what it meant to do.

// ObservationsFile is the observations' name in the data dir.
const ObservationsFile = "observations.jsonl"

// The observation moments.
const (
	MomentStopped             = "stopped" // the worker process stopped (restart or end of run)
	momentBefore, momentAfter = ":before", ":after"
)

// Observation is one snapshot of a worker process.
type Observation struct {
	At     protocol.Time `json:"at"`
	Worker string        `json:"worker"`
	// Moment is "stopped" or FAULT + ":before" / ":after".
	Moment string `json:"moment"`
	// Counters are the process's Prometheus counters since it started,
	// by series: `name{label="value",…}`.
	Counters    map[string]float64     `json:"counters"`
	Reconciled  []runtime.ReconcileLog `json:"reconciled,omitempty"`
	Preemptions []Preemption           `json:"preemptions,omitempty"`
}

// Preemption is one safe-point stop the worker's log says it asked of a
// run (runtime.PreemptionLog without the selection basis).
type Preemption struct {
	GroupID    string    `json:"groupId"`
	WorkItemID string    `json:"workItemId"` // the victim
	For        string    `json:"for"`
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
}

// Counter is the value of one series, 0 when absent.
func (o Observation) Counter(series string) float64 { return o.Counters[series] }

// ReconciledApplied counts the offline commands the authority applied
// when the worker reconciled.
func (o Observation) ReconciledApplied() int {
	n := 0
	for _, l := range o.Reconciled {
		if l.Outcome == "applied" {
			n++
		}
	}
	return n
}

// observe snapshots w.
func observe(id, moment string, w *runtime.Worker, at time.Time) (Observation, error) {
	reg := prometheus.NewRegistry()
	for _, c := range w.Collectors() {
		if err := reg.Register(c); err != nil {
			return Observation{}, err
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		return Observation{}, err
	}
	o := Observation{At: protocol.NewTime(at), Worker: id, Moment: moment, Counters: map[string]float64{}}
	for _, f := range fams {
		if f.GetType().String() != "COUNTER" {
			continue
		}
		for _, m := range f.GetMetric() {
			parts := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(parts)
			name := f.GetName()
			if len(parts) > 0 {
				name += "{" + strings.Join(parts, ",") + "}"
			}
			o.Counters[name] = m.GetCounter().GetValue()
		}
	}
	st := w.Status()
	o.Reconciled = slices.Clone(st.Reconciled)
	for _, p := range st.Preemptions {
		o.Preemptions = append(o.Preemptions, Preemption{GroupID: p.GroupID, WorkItemID: p.WorkItemID, For: p.For, Reason: p.Reason, At: p.At})
	}
	return o, nil
}

// appendObservation appends o to the file at path, fsynced.
func appendObservation(path string, o Observation) error {
	line, err := json.Marshal(o)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("observations: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("observations: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadObservations returns every complete record of the file at path (a
// torn last line is ignored); a missing file is empty.
func ReadObservations(path string) ([]Observation, error) {
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("observations: %w", err)
	}
	var out []Observation
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		var o Observation
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			if !bytes.HasSuffix(raw, []byte("\n")) && bytes.HasSuffix(raw, sc.Bytes()) {
				break
			}
			return nil, fmt.Errorf("observations: line %d: %w", n, err)
		}
		out = append(out, o)
	}
	return out, sc.Err()
}

// findObservation returns the last observation of worker at moment.
func findObservation(obs []Observation, worker, moment string) (Observation, bool) {
	for i := len(obs) - 1; i >= 0; i-- {
		if obs[i].Worker == worker && obs[i].Moment == moment {
			return obs[i], true
		}
	}
	return Observation{}, false
}

// The counter series the checks read.
const seriesDuplicates = `mwp_worker_events_total{result="duplicate"}`

const seriesConnections = "mwp_worker_connections_total"
