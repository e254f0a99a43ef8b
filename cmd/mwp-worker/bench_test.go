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
		want := []string{"authority", "cryptoFloor", "fsync", "groups", "held", "items", "itemsPerSecond", "lanes", "latencyMs", "loadAverage", "perItem",
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
		case r.PerItem.Commands < 6 || r.PerItem.Events < 6 || r.PerItem.CPUMs <= 0 || r.PerItem.AllocatedBytes <= 0:
			t.Fatalf("per item %+v", r.PerItem)
		case r.Held.HeapBytes == 0 || r.Held.RSSBytes == 0 || r.Held.Goroutines == 0 || r.Floor.CPUTimes <= 0:
			t.Fatalf("held %+v, CPU %v× the floor", r.Held, r.Floor.CPUTimes)
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

// `bench --duration --json` prints one reading a line, from "start" to
// "final", each of the documented shape; the text form prints the same
// readings and the growth table.
func TestBenchSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an authority and a worker")
	}
	args := []string{"bench", "--duration", "1s", "--rate", "40", "--items-per-group", "10", "--interval", "300ms", "--warmup", "0s", "--fsync=false"}
	code, out, errOut := runCLI(t, append(args, "--json", "--dir", t.TempDir())...)
	if code != 0 {
		t.Fatalf("bench %v: exit %d: %s", args, code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var samples []bench.Sample
	for _, l := range lines {
		var s bench.Sample
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		samples = append(samples, s)
	}
	first, last := samples[0], samples[len(samples)-1]
	switch {
	case len(samples) < 2 || first.Kind != "start" || last.Kind != "final":
		t.Fatalf("readings %d, first %q, last %q", len(samples), first.Kind, last.Kind)
	case last.Items.Started == 0 || last.Items.Completed != last.Items.Started || last.Items.InFlight != 0:
		t.Fatalf("final items %+v", last.Items)
	case last.Groups.Finished != (last.Items.Completed+9)/10:
		t.Fatalf("%d Missions approved for %d items of 10 a Mission", last.Groups.Finished, last.Items.Completed)
	case last.Run == nil || last.Run.Rate != 40 || last.Run.ItemsPerGroup != 10 || last.Growth == nil || len(last.Notes) == 0:
		t.Fatalf("final run %+v, growth %+v, notes %v", last.Run, last.Growth, last.Notes)
	case last.Authority.Source != "process" || last.Authority.Store == nil || last.Workers.Store.DBFileBytes == 0:
		t.Fatalf("final authority %+v, workers %+v", last.Authority, last.Workers)
	}
	for _, s := range samples[1 : len(samples)-1] {
		if s.Kind != "interval" || s.Run != nil || s.Growth != nil {
			t.Fatalf("a reading between: %+v", s)
		}
	}

	code, out, errOut = runCLI(t, append(args, "--dir", t.TempDir())...)
	if code != 0 {
		t.Fatalf("bench %v: exit %d: %s", args, code, errOut)
	}
	for _, want := range []string{" start ", " final ", "soak: ", "authority.store.dbUsedBytes", "workers.goroutines", "note: the authority runs in this process"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}

// A soak's bad flags: usage errors (exit 2) for flags of the other mode,
// one line and exit 1 for values out of range.
func TestBenchSoakBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--duration", "1m", "--items", "5"}, 2, "--items is for a run of a fixed number of items"},
		{[]string{"--rate", "3"}, 2, "--rate is only for a soak (--duration)"},
		{[]string{"--heap-profile", "profiles"}, 2, "--heap-profile is only for a soak (--duration)"},
		{[]string{"--duration", "1m", "--authority-metrics", "http://127.0.0.1:1/metrics"}, 2, "--authority-metrics is only for a run against a running authority"},
		{[]string{"--duration", "1m", "--rate", "0"}, 1, "--rate must be positive"},
		{[]string{"--duration", "10s", "--warmup", "10s"}, 1, "--warmup 10s must be at least 0 and shorter than --duration 10s"},
		{[]string{"--duration", "1m", "--items-per-group", "0"}, 1, "--items-per-group must be at least 1"},
		{[]string{"--duration", "1m", "--purge-after", "1m"}, 1, "--purge-after deletes archived Groups: it needs --archive-after"},
		{[]string{"--items", "5", "--forget-grace", "-1s"}, 1, "must not be negative"},
		{[]string{"--duration", "1m", "--authority", "wss://127.0.0.1:1/mwp", "--archive-after", "1m"}, 2, "--archive-after tunes the embedded authority"},
	} {
		code, out, errOut := runCLI(t, append([]string{"bench"}, tc.args...)...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) || tc.code == 1 && strings.Count(errOut, "\n") != 1 {
			t.Errorf("bench %v: exit %d, stdout %q, stderr %q; want exit %d with %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
}
