package runtime

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// An item's estimate is the longest observed mean of its capabilities,
// resting on the fewest runs among them; while one capability has none,
// the configured guess, resting on none. The scheduler gets both, except
// the guess: for an item resting on no run it charges the Group's observed
// mean instead (its own default being the same configured guess).
func TestEstimateOf(t *testing.T) {
	e := &engine{cfg: WorkerConfig{Estimate: time.Minute}, runs: map[string]runStats{}}
	var impl, review runStats
	impl.add(8 * time.Minute)
	impl.add(12 * time.Minute)
	review.add(3 * time.Minute)
	e.runs["code.implement"], e.runs["code.review"] = impl, review
	caps := func(ids ...string) queue.Entry {
		var en queue.Entry
		for _, id := range ids {
			en.Capabilities = append(en.Capabilities, protocol.Capability{ID: id, Version: "1.x"})
		}
		return en
	}
	for _, tc := range []struct {
		name string
		en   queue.Entry
		est  time.Duration
		runs int
	}{
		{"observed", caps("code.implement"), 10 * time.Minute, 2},
		{"two observed: the longer, the fewer runs", caps("code.implement", "code.review"), 10 * time.Minute, 1},
		{"one never run: the guess", caps("code.implement", "code.deploy"), time.Minute, 0},
		{"no capability: the guess", caps(), time.Minute, 0},
	} {
		est, runs := e.estimateOf(tc.en)
		if est != tc.est || runs != tc.runs {
			t.Errorf("%s: %v on %d runs, want %v on %d", tc.name, est, runs, tc.est, tc.runs)
		}
		want := tc.est
		if tc.runs == 0 {
			want = 0
		}
		if si := e.schedItem(itemKey{"grp-a", "wi-1"}, tc.en, false); si.Estimate != want || si.Observed != tc.runs {
			t.Errorf("%s: scheduler item estimate %v on %d runs", tc.name, si.Estimate, si.Observed)
		}
	}
}
