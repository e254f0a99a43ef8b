package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestScaleGroups prints what one more Group costs the process that runs
// the bench (embedded authority, workers, driver), and what it costs one
// more worker, from four runs in a row: 1 and N Groups, each with 1 and 2
// workers, every Group with two items (TestScaleGroupsRun), the readings taken (bench.Held)
// once the last item is verified with everything still open. Per Group is
// (N Groups − 1 Group) / (N − 1) with one worker; per Group per worker is
// that difference with two workers less the one with one worker, so each
// worker's fixed cost falls out.
//
// It runs only with MWP_SCALE_GROUPS=N set (docs/scale.sh uses 200) and
// asserts nothing about time or memory.
func TestScaleGroups(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MWP_SCALE_GROUPS"))
	if n < 2 {
		t.Skip("set MWP_SCALE_GROUPS=N (N ≥ 2) to measure (docs/scale.sh)")
	}
	held := map[[2]int]Held{}
	for _, groups := range []int{1, n} {
		for _, workers := range []int{1, 2} {
			// Each run in a process of its own: RSS does not give back
			// what an earlier run in the same process touched.
			cmd := exec.Command(os.Args[0], "-test.run", "^TestScaleGroupsRun$", "-test.timeout", "10m")
			cmd.Env = append(os.Environ(), fmt.Sprintf("MWP_SCALE_RUN=%d,%d", groups, workers))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%d Groups, %d workers: %v", groups, workers, err)
			}
			var h Held
			_, line, _ := strings.Cut(string(out), "held ")
			line, _, _ = strings.Cut(line, "\n")
			if err := json.Unmarshal([]byte(line), &h); err != nil {
				t.Fatalf("%d Groups, %d workers: %v in %q", groups, workers, err, out)
			}
			held[[2]int{groups, workers}] = h
			t.Logf("%d Groups, %d workers: %+v", groups, workers, h)
		}
	}
	d := func(get func(Held) float64, groups, workers int) float64 {
		return get(held[[2]int{groups, workers}]) - get(held[[2]int{1, workers}])
	}
	row := func(name string, get func(Held) float64, unit float64, format string) {
		one := d(get, n, 1) / float64(n-1)
		worker := (d(get, n, 2) - d(get, n, 1)) / float64(n-1)
		fmt.Printf("| %s per Group | "+format+" (of it, each worker "+format+") | %d Groups against 1, with 1 and with 2 workers |\n", name, one/unit, worker/unit, n)
	}
	row("heap", func(h Held) float64 { return float64(h.HeapBytes) }, 1024, "%.1f KB")
	row("RSS", func(h Held) float64 { return float64(h.RSSBytes) }, 1024, "%.1f KB")
	row("goroutines", func(h Held) float64 { return float64(h.Goroutines) }, 1, "%.2f")
}

// TestScaleGroupsRun is one run of TestScaleGroups, in a child process:
// MWP_SCALE_RUN=GROUPS,WORKERS. Two items a Group, one for each worker
// when there are two, so the items held are the same in every run.
func TestScaleGroupsRun(t *testing.T) {
	var groups, workers int
	if _, err := fmt.Sscanf(os.Getenv("MWP_SCALE_RUN"), "%d,%d", &groups, &workers); err != nil {
		t.Skip("a child of TestScaleGroups")
	}
	res, err := Run(context.Background(), Config{Items: max(8, 2*groups), Lanes: 8, Workers: workers, Groups: groups, Slots: 8, Fsync: true, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(res.Held)
	fmt.Printf("held %s\n", data)
}
