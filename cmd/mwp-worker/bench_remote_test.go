package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/bench"
	"github.com/missionweave/mwp-worker/protocol"
)

// `bench --authority` drives its items through a running `authority
// serve` in another process, as principals that authority knows: the
// authority's own log then holds every item verified, in Groups of the
// run's own, and a second run against the same log opens new ones.
func TestBenchRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	writeKey(t, keys, "alice", protocol.ActorHuman, "alice")
	// Every principal the way an operator makes it: keygen, then each
	// agent's enrollment document from its own command.
	writeKey(t, keys, "coord", protocol.ActorAgent, "coord")
	coordEnroll := filepath.Join(dir, "coord-enroll.json")
	if out, err := exec.Command(bin, "coordinator", "enrollment", "--key", filepath.Join(keys, "coord.key"), "--out", coordEnroll).CombinedOutput(); err != nil ||
		!strings.HasPrefix(string(out), "enrollment of coord written to "+coordEnroll+", valid until ") {
		t.Fatalf("coordinator enrollment: %v\n%s", err, out)
	}
	enrolls := []string{"--enroll", coordEnroll}
	for _, w := range []string{"w1", "w2"} {
		writeKey(t, keys, w, protocol.ActorAgent, w)
		path := filepath.Join(dir, w+"-enroll.json")
		if out, err := exec.Command(bin, "run", "--data", filepath.Join(dir, w), "--key", filepath.Join(keys, w+".key"), "--enrollment", path).CombinedOutput(); err != nil {
			t.Fatalf("run --enrollment: %v\n%s", err, out)
		}
		enrolls = append(enrolls, "--enroll", path)
	}
	writeKey(t, keys, "w3", protocol.ActorAgent, "w3") // never enrolled
	// serve starts `authority serve` on data directory name with the rate
	// limits given, and returns the bench flags that target it.
	serve := func(name string, rates ...string) func(workers ...string) []string {
		data := filepath.Join(dir, name)
		auth := startProc(t, bin, append(append([]string{"authority", "serve", "--data", data, "--listen", "127.0.0.1:0",
			"--human", "alice=" + filepath.Join(keys, "alice.pub")}, enrolls...), rates...)...)
		url := auth.await(t, listeningLine, 10*time.Second)[1]
		fp := auth.await(t, fingerprintLine, 5*time.Second)[1]
		return func(workers ...string) []string {
			a := []string{"bench", "--authority", url, "--authority-fingerprint", fp, "--authority-key", filepath.Join(data, "authority.pub"),
				"--owner-key", filepath.Join(keys, "alice.key"), "--coordinator-key", filepath.Join(keys, "coord.key")}
			for _, w := range workers {
				a = append(a, "--worker-key", filepath.Join(keys, w+".key"))
			}
			return a
		}
	}
	// The route rate a load generator needs (the default would be what it
	// measures).
	remoteArgs := serve("authority", "--route-rate", "1000000/1ms")
	url := remoteArgs()[2]

	var groups []string
	for run, items := range []int{30, 8} {
		code, out, errOut := runCLI(t, append(remoteArgs("w1", "w2"), "--items", itoa(items), "--lanes", "4", "--groups", "2", "--json", "--dir", t.TempDir())...)
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", run, code, errOut)
		}
		var r bench.Result
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, out)
		}
		t.Logf("run %d: %.1fs, %.1f items/s, refused %v", run, r.Seconds, r.ItemsPerSecond, r.Totals.Refused)
		var stores []string
		for f := range r.Totals.Commits {
			stores = append(stores, f)
		}
		slices.Sort(stores)
		switch {
		case r.Authority != url || r.Items != items || r.Verified != items || r.Workers != 2 || r.Groups != 2:
			t.Fatalf("run %d: %+v", run, r)
		case r.Totals.Commands["work.authorize"] != items || r.Totals.Commands["work.accept_offer"] != items ||
			r.Totals.Commands["work.submit"] != items || r.Totals.Commands["work.accept_result"] != items:
			t.Fatalf("run %d: commands %v", run, r.Totals.Commands)
		case !slices.Equal(stores, []string{"workers/w1/worker.db", "workers/w2/worker.db"}):
			t.Fatalf("run %d: stores %v, want the workers' only", run, stores)
		case r.Totals.RateLimited != 0:
			t.Fatalf("run %d: %d requests rate limited under unbounded rates", run, r.Totals.RateLimited)
		case r.PerItem.Events < 6 || r.Totals.Events < 6*items || r.Floor.Ratio <= 0:
			t.Fatalf("run %d: per item %+v, events %d, floor %+v", run, r.PerItem, r.Totals.Events, r.Floor)
		}
	}
	// The authority's own account: four new Groups, each item of each
	// verified, nothing else.
	var st struct {
		Groups []struct {
			GroupID string         `json:"groupId"`
			Items   map[string]int `json:"items"`
		} `json:"groups"`
	}
	out, err := exec.Command(bin, "authority", "inspect", "--data", filepath.Join(dir, "authority"), "--json").Output()
	if err != nil || json.Unmarshal(out, &st) != nil {
		t.Fatalf("authority inspect: %v\n%s", err, out)
	}
	total := 0
	for _, g := range st.Groups {
		if !regexp.MustCompile(`^grp-bench-[0-9a-f]{8}-[12]$`).MatchString(g.GroupID) || len(g.Items) != 1 || g.Items["verified"] == 0 {
			t.Fatalf("group %s: items %v", g.GroupID, g.Items)
		}
		groups = append(groups, g.GroupID)
		total += g.Items["verified"]
	}
	if len(groups) != 4 || total != 38 {
		t.Fatalf("groups %v hold %d verified items, want 4 Groups and 38", groups, total)
	}

	// Under an authority's route limit the run still completes, and says
	// how often and how long it waited.
	limitedArgs := serve("limited", "--route-rate", "5/50ms")
	code, out2, errOut := runCLI(t, append(limitedArgs("w1"), "--items", "8", "--lanes", "4", "--json", "--dir", t.TempDir())...)
	var lr bench.Result
	if code != 0 || json.Unmarshal([]byte(out2), &lr) != nil {
		t.Fatalf("limited run: exit %d: %s%s", code, out2, errOut)
	}
	if lr.Verified != 8 || lr.Totals.RateLimited == 0 || lr.Totals.RateLimitedSeconds <= 0 {
		t.Fatalf("limited run: verified %d, %d rate-limited waits of %vs", lr.Verified, lr.Totals.RateLimited, lr.Totals.RateLimitedSeconds)
	}

	// An agent the authority does not know fails the run before any item,
	// in one line; a remote flag without --authority is a usage error.
	code, outB, errOut := runCLI(t, append(remoteArgs("w3"), "--items", "2", "--lanes", "1", "--dir", t.TempDir())...)
	if code != 1 || outB != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "w3 is not known to the authority") {
		t.Fatalf("unknown worker: exit %d, stdout %q, stderr %q", code, outB, errOut)
	}
	// No authority at the address: one line, exit 1 (it once crashed here).
	dead := append([]string{"bench", "--authority", "wss://127.0.0.1:1/mwp"}, remoteArgs("w1")[3:]...)
	code, outB, errOut = runCLI(t, append(dead, "--items", "2", "--lanes", "1")...)
	if code != 1 || outB != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "connection refused") {
		t.Fatalf("no authority: exit %d, stdout %q, stderr %q", code, outB, errOut)
	}
	code, _, errOut = runCLI(t, "bench", "--owner-key", filepath.Join(keys, "alice.key"))
	if code != 2 || !strings.Contains(errOut, "--owner-key is only for a run against a running authority") {
		t.Fatalf("--owner-key alone: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "coordinator", "enrollment", "--key", filepath.Join(keys, "alice.key"), "--out", filepath.Join(dir, "x.json"))
	if code != 2 || !strings.Contains(errOut, "is not an agent's") {
		t.Fatalf("coordinator enrollment of a human's key: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "coordinator", "enrollment", "--key", filepath.Join(keys, "coord.key"), "--out", filepath.Join(dir, "x.json"), "--enrollment-valid", "25h")
	if code != 2 || !strings.Contains(errOut, "--enrollment-valid 25h") {
		t.Fatalf("coordinator enrollment valid 25h: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, append(remoteArgs("w1"), "--workers", "2")...)
	if code != 1 || !strings.Contains(errOut, "--workers 2 with 1 worker keys") {
		t.Fatalf("--workers against the keys: exit %d, %q", code, errOut)
	}
}

// A soak against a running authority finishes its Missions over the
// HTTPS routes and reads the authority's resources from its /metrics,
// saying what it cannot read there (its stores).
func TestBenchSoakRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	writeKey(t, keys, "alice", protocol.ActorHuman, "alice")
	writeKey(t, keys, "coord", protocol.ActorAgent, "coord")
	writeKey(t, keys, "w1", protocol.ActorAgent, "w1")
	coordEnroll, w1Enroll := filepath.Join(dir, "coord-enroll.json"), filepath.Join(dir, "w1-enroll.json")
	if out, err := exec.Command(bin, "coordinator", "enrollment", "--key", filepath.Join(keys, "coord.key"), "--out", coordEnroll).CombinedOutput(); err != nil {
		t.Fatalf("coordinator enrollment: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "run", "--data", filepath.Join(dir, "w1"), "--key", filepath.Join(keys, "w1.key"), "--enrollment", w1Enroll).CombinedOutput(); err != nil {
		t.Fatalf("run --enrollment: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "authority")
	auth := startProc(t, bin, "authority", "serve", "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--human", "alice="+filepath.Join(keys, "alice.pub"), "--enroll", coordEnroll, "--enroll", w1Enroll, "--route-rate", "1000000/1ms")
	metrics := auth.await(t, regexp.MustCompile(`metrics listening on (http://127\.0\.0\.1:\d+/metrics)`), 10*time.Second)[1]
	url := auth.await(t, listeningLine, 10*time.Second)[1]
	fp := auth.await(t, fingerprintLine, 5*time.Second)[1]
	code, out, errOut := runCLI(t, "bench", "--authority", url, "--authority-fingerprint", fp, "--authority-key", filepath.Join(data, "authority.pub"),
		"--owner-key", filepath.Join(keys, "alice.key"), "--coordinator-key", filepath.Join(keys, "coord.key"), "--worker-key", filepath.Join(keys, "w1.key"),
		"--authority-metrics", metrics, "--duration", "1s", "--rate", "20", "--items-per-group", "5", "--interval", "10s", "--warmup", "0s",
		"--json", "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var last bench.Sample
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	a := last.Authority
	switch {
	case last.Kind != "final" || last.Items.Completed == 0 || last.Groups.Finished != (last.Items.Completed+4)/5:
		t.Fatalf("final %q: items %+v, groups %+v", last.Kind, last.Items, last.Groups)
	case a.Source != "metrics" || a.Store != nil || a.Goroutines == nil || *a.Goroutines <= 0 || a.HeapInuseBytes == nil || a.OpenFiles == nil ||
		a.LogEvents == nil || *a.LogEvents < float64(6*last.Items.Completed) || a.Connections == nil || *a.Connections < 1:
		t.Fatalf("authority %+v", a)
	case !slices.ContainsFunc(last.Notes, func(n string) bool { return strings.Contains(n, "store sizes are not exported") }):
		t.Fatalf("notes %v", last.Notes)
	}
	// The authority's own account: each finished Mission approved, the
	// one opened ahead still active.
	var st struct {
		Groups []struct {
			GroupID string `json:"groupId"`
			Mission string `json:"missionState"`
		} `json:"groups"`
	}
	if out, err := exec.Command(bin, "authority", "inspect", "--data", data, "--json").Output(); err != nil || json.Unmarshal(out, &st) != nil {
		t.Fatalf("authority inspect: %v\n%s", err, out)
	}
	approved := 0
	for _, g := range st.Groups {
		if g.Mission == "approved" {
			approved++
		}
	}
	if approved != last.Groups.Finished || len(st.Groups) != last.Groups.Finished+last.Groups.Open {
		t.Fatalf("the authority holds %+v; the soak reported %+v", st.Groups, last.Groups)
	}
}
