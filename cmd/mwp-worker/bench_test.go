package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/internal/bench"
)

// `bench --json` drives its items end to end over wss and prints one
// object of the documented shape, every item verified.
func TestBenchJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an authority and a worker")
	}
	for _, fsync := range []bool{true, false} {
		args := []string{"bench", "--items", "50", "--lanes", "4", "--json", "--dir", t.TempDir()}
		if !fsync {
			args = append(args, "--fsync=false")
		}
		code, out, errOut := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("bench %v: exit %d: %s", args, code, errOut)
		}
		// The shape docs/shapes.md gives, field by field.
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("not one JSON object: %v\n%s", err, out)
		}
		want := []string{"authority", "cryptoFloor", "fsync", "groups", "items", "itemsPerSecond", "lanes", "latencyMs", "loadAverage", "perItem",
			"seconds", "slots", "totals", "verified", "workers"}
		var got []string
		for k := range doc {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("fields %v, want %v", got, want)
		}
		var r bench.Result
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Items != 50 || r.Verified != 50 || r.Lanes != 4 || r.Fsync != fsync || r.Authority != "embedded" || r.Totals.RateLimited != 0:
			t.Fatalf("run: %+v", r)
		case r.ItemsPerSecond <= 0 || r.Latency.EndToEnd.P50 <= 0 || r.Latency.EndToEnd.Max < r.Latency.EndToEnd.P99:
			t.Fatalf("rate %v, end to end %+v", r.ItemsPerSecond, r.Latency.EndToEnd)
		case r.Totals.Commands["work.authorize"] != 50 || r.Totals.Commands["work.submit"] != 50 || r.Totals.Commands["work.accept_result"] != 50:
			t.Fatalf("commands %v", r.Totals.Commands)
		case r.PerItem.Commands < 6 || r.PerItem.Events < 6 || r.PerItem.CPUMs <= 0:
			t.Fatalf("per item %+v", r.PerItem)
		case r.Totals.Commits["authority/authority.db"] == 0 || r.Totals.Commits["workers/w1/worker.db"] == 0:
			t.Fatalf("commits %v", r.Totals.Commits)
		case fsync && r.PerItem.Fdatasyncs < 2 || !fsync && r.PerItem.Fdatasyncs != 0:
			t.Fatalf("fsync %v: %v fdatasyncs per item", fsync, r.PerItem.Fdatasyncs)
		case r.Floor.Cores < 1 || r.Floor.SignUs <= 0 || r.Floor.VerifyUs <= 0 || r.Floor.ItemsPerSecond <= 0 || r.Floor.Ratio <= 0 ||
			r.Floor.SignCPUUs <= 0 || r.Floor.VerifyCPUUs <= 0 || r.Floor.CPUShare <= 0 || r.Floor.CPUShare > 1:
			t.Fatalf("floor %+v", r.Floor)
		}
	}
}

// A bad flag combination is one line on stderr and exit status 1.
func TestBenchBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--items", "5", "--lanes", "10"}, "--lanes 10 exceeds --items 5"},
		{[]string{"--items", "0"}, "--items must be at least 1"},
		{[]string{"--workers", "0"}, "--workers must be at least 1"},
		{[]string{"--items", "3", "--lanes", "1", "--groups", "4"}, "--groups 4 exceeds --items 3"},
		// Items that cannot be verified in time fail the run, never a partial result.
		{[]string{"--items", "3", "--lanes", "1", "--item-timeout", "1ms"}, "wi-0000000"},
	} {
		code, out, errOut := runCLI(t, append([]string{"bench"}, tc.args...)...)
		if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "mwp-worker: bench: ") || !strings.Contains(errOut, tc.want) {
			t.Errorf("bench %v: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
