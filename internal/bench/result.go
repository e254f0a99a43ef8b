package bench

import (
	"fmt"
	"strings"
	"time"
)

// result turns the window's counters and the items' times into figures,
// and measures the crypto floor of what the run signed and verified.
func (r *rig) result(tr *tracker, window time.Duration, before, after counters, grows int) (*Result, error) {
	n := float64(r.cfg.Items)
	res := &Result{Items: r.cfg.Items, Lanes: r.cfg.Lanes, Workers: r.cfg.Workers, Groups: r.cfg.Groups, Slots: r.cfg.Slots, Fsync: r.cfg.Fsync, Authority: r.auth.name(),
		Verified: tr.verified(), Seconds: window.Seconds(), ItemsPerSecond: n / window.Seconds(),
		Totals: Totals{Commands: map[string]int{}, Refused: map[string]int{}, Commits: map[string]uint64{}, FileGrowths: grows}}

	tr.mu.Lock()
	var ph [5][]time.Duration
	for _, t := range tr.order {
		ph[0] = append(ph[0], t.at[phaseAccepted].Sub(t.at[phaseOffered]))
		ph[1] = append(ph[1], t.at[phaseStarted].Sub(t.at[phaseAccepted]))
		ph[2] = append(ph[2], t.at[phaseSubmitted].Sub(t.at[phaseStarted]))
		ph[3] = append(ph[3], t.at[phaseVerified].Sub(t.at[phaseSubmitted]))
		ph[4] = append(ph[4], t.at[phaseVerified].Sub(t.begin))
	}
	itemEvents, eventBytes := tr.events, tr.eventBytes
	tr.mu.Unlock()
	res.Latency = Phases{OfferToAccepted: percentiles(ph[0]), AcceptedToStarted: percentiles(ph[1]), StartedToSubmitted: percentiles(ph[2]),
		SubmittedToVerified: percentiles(ph[3]), EndToEnd: percentiles(ph[4])}

	commands := 0
	for k, v := range after.commands {
		d := int(v - before.commands[k])
		if d == 0 {
			continue
		}
		typ, result, _ := strings.Cut(k, " ")
		if result == "accepted" {
			res.Totals.Commands[typ] += d
			commands += d
		} else {
			res.Totals.Refused[typ+" "+result] += d
		}
	}
	for g, s := range after.sequences {
		res.Totals.Events += int(s - before.sequences[g])
	}
	for i, f := range r.storeFiles() {
		name := strings.TrimPrefix(f, r.dir+"/")
		c := after.txids[i] - before.txids[i]
		res.Totals.Commits[name] = c
		if r.cfg.Fsync {
			res.Totals.Fdatasyncs += 2 * c
		}
	}
	if r.cfg.Fsync {
		res.Totals.Fdatasyncs += uint64(grows)
	}
	res.Totals.RateLimited = after.limited - before.limited
	res.Totals.RateLimitedSeconds = (after.limitWait - before.limitWait).Seconds()
	res.Totals.WriteBytes = after.writeBytes - before.writeBytes
	res.Totals.CPUSeconds = (after.cpu - before.cpu).Seconds()
	res.Totals.AllocatedBytes = after.allocated - before.allocated
	res.PerItem = PerItem{Commands: float64(commands) / n, Events: float64(res.Totals.Events) / n,
		Fdatasyncs: float64(res.Totals.Fdatasyncs) / n, BytesWritten: float64(res.Totals.WriteBytes) / n,
		CPUMs: res.Totals.CPUSeconds * 1000 / n, AllocatedBytes: float64(res.Totals.AllocatedBytes) / n}
	if itemEvents == 0 {
		return nil, fmt.Errorf("no WorkItem events seen")
	}

	// Every command is signed by its sender and verified by the authority;
	// every event is signed by the authority and verified by each worker,
	// all of which follow every Group.
	size := eventBytes / itemEvents
	sign, verify, err := measureFloor(size, 300*time.Millisecond)
	if err != nil {
		return nil, err
	}
	f := Floor{Cores: cores(), MessageBytes: size, SignUs: us(sign.wall), VerifyUs: us(verify.wall),
		SignCPUUs: us(sign.cpu), VerifyCPUUs: us(verify.cpu),
		SignsPerItem:    res.PerItem.Commands + res.PerItem.Events,
		VerifiesPerItem: res.PerItem.Commands + res.PerItem.Events*float64(r.cfg.Workers)}
	f.PerItemUs = f.SignsPerItem*f.SignUs + f.VerifiesPerItem*f.VerifyUs
	f.ItemsPerSecond = float64(f.Cores) * 1e6 / f.PerItemUs
	f.Ratio = res.ItemsPerSecond / f.ItemsPerSecond
	f.PerItemCPUUs = f.SignsPerItem*f.SignCPUUs + f.VerifiesPerItem*f.VerifyCPUUs
	if res.PerItem.CPUMs > 0 {
		f.CPUShare = f.PerItemCPUUs / (res.PerItem.CPUMs * 1000)
		f.CPUTimes = res.PerItem.CPUMs * 1000 / f.PerItemCPUUs
	}
	res.Floor = f
	res.LoadAverage = loadAverage()
	return res, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
