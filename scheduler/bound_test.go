package scheduler_test

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
	"github.com/missionweave/mwp-worker/scheduler/simulate"
)

// Helpers shared by the workload tests: building workloads, the documented
// bounds (doc.go) and slot-time accounting over a simulated trace.

func i64(v int64) *int64 { return &v }

func item(id, group, urgency string, arrival, duration int64) simulate.ItemSpec {
	return simulate.ItemSpec{ID: id, Group: group, Urgency: urgency, ArrivalMs: i64(arrival), DurationMs: i64(duration)}
}

// fastAging is a Config whose aging bounds are short next to the workloads'
// durations, so the within-Group part of the bound is exercised.
var fastAging = scheduler.Config{
	MaxWait: [4]time.Duration{500 * time.Millisecond, 200 * time.Millisecond, 50 * time.Millisecond, 10 * time.Millisecond},
}

// maxWaitMs mirrors MaxWait(urgency, impact) for the simulator's items
// (impact medium: 80% by default).
func maxWaitMs(cfg scheduler.Config, u scheduler.Urgency) int64 {
	mw := cfg.MaxWait[u]
	if mw == 0 {
		mw = scheduler.DefaultMaxWait[u]
	}
	return mw.Milliseconds() * scheduler.DefaultImpactPercent[scheduler.ImpactMedium] / 100
}

// boundR is R(k) of doc.go, in ms: the longest a Group that stays
// backlogged waits for its k-th pick.
func boundR(in *simulate.Input, group string, k int64, dStar int64) float64 {
	S := float64(in.Slots)
	var W, w, q, Q float64
	for _, g := range in.Groups {
		qg := S
		if g.Quota != nil {
			qg = math.Min(float64(*g.Quota), S)
		}
		W += float64(g.Weight)
		if g.ID == group {
			w, q = float64(g.Weight), qg
		} else {
			Q += qg
		}
	}
	D := float64(dStar)
	return (float64(k)+q)*D*math.Max(W/(w*S), 1/q) + (((W-w)/w)*q*D+(Q+S)*D)/S
}

// maxDuration is D* for a workload: the longest run (estimates are exact).
func maxDuration(in *simulate.Input) int64 {
	var d int64 = 1
	for _, it := range in.Items {
		d = max(d, *it.DurationMs)
	}
	return d
}

// slotTimeUntil sums each Group's slot-time in [0, cut] from a trace.
func slotTimeUntil(r *simulate.Result, cut int64) map[string]int64 {
	out := map[string]int64{}
	for _, run := range r.Stays {
		if run.StartMs < cut {
			out[run.Group] += min(run.EndMs, cut) - run.StartMs
		}
	}
	return out
}

// backlog builds n items per Group, all arriving at 0, durations in
// [lo, hi] from a seeded source.
func backlog(seed uint64, slots int, weights map[string]int64, n int, lo, hi int64) *simulate.Input {
	rng := rand.New(rand.NewPCG(seed, 1))
	in := &simulate.Input{Slots: slots}
	ids := []string{"g1", "g2", "g3", "g4", "g5", "g6"}[:len(weights)]
	for _, id := range ids {
		in.Groups = append(in.Groups, simulate.GroupSpec{ID: id, Weight: weights[id]})
	}
	urg := []string{"low", "normal", "high", "critical"}
	for i := range n {
		for _, id := range ids {
			d := lo + rng.Int64N(hi-lo+1)
			in.Items = append(in.Items, item(id+"-"+itoa(i), id, urg[rng.IntN(4)], 0, d))
		}
	}
	return in
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	p := len(b)
	for ; i > 0; i /= 10 {
		p--
		b[p] = byte('0' + i%10)
	}
	return string(b[p:])
}
