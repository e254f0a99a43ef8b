package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/internal/ops"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/missionweave/mwp-worker/slots"
)

type noHandler struct{}

func (noHandler) Capability() protocol.Capability {
	return protocol.Capability{ID: "x", Version: "1.0.0"}
}
func (noHandler) Run(context.Context, *slots.Work) (slots.Result, error) {
	return slots.Result{}, nil
}

// exportedNames are the metric names the worker, the authority, the
// coordinator and the Go runtime's collectors describe: what the three
// long-running commands serve.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	key, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorAgent, "w1", "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w, err := runtime.NewWorker(runtime.WorkerConfig{Dir: t.TempDir(), Key: key, AgentID: "w1", URL: "wss://127.0.0.1:1/mwp",
		Handlers: []slots.Handler{noHandler{}}, Card: protocol.AgentCard{MaxConcurrency: 1}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := authoritylite.Open(authoritylite.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	cols := append(append(w.Collectors(), svc.Collectors()...), backpressureCounter(), coordinatorMetrics{})
	cols = append(cols, connectionGauges(nil)...)
	names := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range cols {
			c.Describe(ch)
		}
		close(ch)
	}()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	fams, err := ops.NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	return names
}

// Every expression of the example Grafana dashboard names only metrics
// the code exports (a histogram's _bucket, _sum and _count included), and
// the dashboard covers what an operator watches first.
func TestGrafanaDashboardNamesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../examples/grafana/mwp-worker.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	names := exportedNames(t)
	exported := func(n string) bool {
		if names[n] {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && names[base] {
				return true
			}
		}
		return false
	}
	metric := regexp.MustCompile(`\b(?:mwp|go|process)_[a-z0-9_]+`)
	used := map[string]bool{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range metric.FindAllString(tg.Expr, -1) {
				if !exported(n) {
					t.Errorf("panel %q: %s is not a metric the code exports: %s", p.Title, n, tg.Expr)
				}
				used[n] = true
			}
		}
	}
	for _, want := range []string{"mwp_worker_queue_items", "mwp_worker_group_busy_slots", "mwp_worker_slots", "mwp_worker_lease_renewals_total",
		"mwp_worker_online", "mwp_worker_command_seconds_bucket", "mwp_authority_commit_seconds_count", "mwp_coordinator_missions", "mwp_coordinator_stages",
		"mwp_worker_run_retries_total", "mwp_worker_events_uninterpreted_total"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}
