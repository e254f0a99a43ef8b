package poc

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunEndToEnd runs the whole proof of concept unattended and checks
// the report read back from the durable stores.
func TestRunEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("the full PoC run takes a few seconds")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	rep, err := Run(context.Background(), Options{Dir: dir, AutoApprove: true, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !rep.OK() {
		var b bytes.Buffer
		_ = rep.WriteText(&b)
		t.Fatalf("report not ok:\n%s", b.String())
	}
	shared := map[string]map[string]bool{} // worker -> groups it ran
	for _, s := range rep.Slots {
		for _, iv := range s.Intervals {
			if shared[s.Worker] == nil {
				shared[s.Worker] = map[string]bool{}
			}
			shared[s.Worker][iv.Group] = true
		}
	}
	if !shared[worker1]["grp-a"] || !shared[worker1]["grp-b"] {
		t.Fatalf("the Missions did not share %s: %v", worker1, shared)
	}
	for _, m := range rep.Missions {
		if m.FinalState != "approved" {
			t.Fatalf("mission %s is %s", m.ID, m.FinalState)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "timeline.svg")); err != nil {
		t.Fatalf("timeline: %v", err)
	}
	if !strings.Contains(out.String(), "approval page: http://127.0.0.1:") {
		t.Fatalf("approval page not announced:\n%s", out.String())
	}
}

// TestRunFaultSuite injects, for real, the faults whose moment does not
// depend on the machine's speed and checks that each was injected and
// held, and every invariant held, from the stores. lease-expiry (a 20 s
// lease must lapse) and priority-arrival (both slots must hold long runs
// at once, which a loaded CI machine may never offer) run in `mwp-worker
// poc --faults all`; the runtime's own tests cover both mechanisms.
func TestRunFaultSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault suite takes several seconds")
	}
	faults := []FaultName{FaultDuplicateDelivery, FaultWorkerRestart, FaultCoordinatorFailover, FaultGroupDisconnect, FaultChangeRequest}
	var out bytes.Buffer
	rep, err := Run(context.Background(), Options{Dir: t.TempDir(), AutoApprove: true, Faults: faults, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	var b bytes.Buffer
	_ = rep.WriteText(&b)
	if len(rep.Faults) != len(faults) {
		t.Fatalf("%d fault results, want %d\n%s", len(rep.Faults), len(faults), b.String())
	}
	for _, f := range rep.Faults {
		if !f.Injected || !f.Held {
			t.Errorf("fault %s: injected %v held %v: %s", f.Name, f.Injected, f.Held, f.Detail)
		}
	}
	if !rep.OK() {
		t.Fatalf("report not ok:\n%s", b.String())
	}
}
