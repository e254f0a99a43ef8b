package runtime

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/queue"
)

// What the worker has seen of its own runs, for the estimates it discloses
// (spec 11.2) and admits on (spec 10.3): how long a capability's runs take
// and how long a picked item takes to be running. Kept in the store's
// observed/ bucket (runs/<capability id>, start), written at most every
// observeSaveEvery and when Run ends, so a restart keeps what a worker has
// learned over weeks; a crash loses at most that interval's runs.
//
//	observed/
//	  runs/   capability id -> {"n": runs, "meanNs": mean}
//	  start   {"n": starts, "meanNs": mean}

// observeSaveEvery bounds how often the observations are written: each
// write is a store commit, which no completed run should cost.
const observeSaveEvery = 30 * time.Second

// meanWindow is how many runs the mean weighs at most: past it a new run
// moves the mean by 1/meanWindow of its difference, so the estimate
// follows a capability whose runs change over weeks.
const meanWindow = 256

// runStats is the history of one capability's completed runs.
type runStats struct {
	n    int
	mean time.Duration
}

func (r *runStats) add(d time.Duration) {
	r.n++
	r.mean += (d - r.mean) / time.Duration(min(r.n, meanWindow))
}

type statsRecord struct {
	N      int   `json:"n"`
	MeanNs int64 `json:"meanNs"`
}

var (
	bktObserved = []byte("observed")
	bktRuns     = []byte("runs")
	keyStart    = []byte("start")
)

// loadObserved reads the observations a previous run saved; a record that
// does not decode (or is negative) is skipped: an estimate starts over,
// nothing else depends on it.
func loadObserved(db *bolt.DB) (runs map[string]runStats, start runStats, err error) {
	runs = map[string]runStats{}
	read := func(b []byte) (runStats, bool) {
		var r statsRecord
		if b == nil || json.Unmarshal(b, &r) != nil || r.N <= 0 || r.MeanNs < 0 {
			return runStats{}, false
		}
		return runStats{n: r.N, mean: time.Duration(r.MeanNs)}, true
	}
	err = db.View(func(tx *bolt.Tx) error {
		ob := tx.Bucket(bktObserved)
		if ob == nil {
			return nil
		}
		start, _ = read(ob.Get(keyStart))
		if rb := ob.Bucket(bktRuns); rb != nil {
			return rb.ForEach(func(k, v []byte) error {
				if r, ok := read(v); ok {
					runs[string(k)] = r
				}
				return nil
			})
		}
		return nil
	})
	return runs, start, err
}

// saveObserved writes every observation in one transaction.
func saveObserved(db *bolt.DB, runs map[string]runStats, start runStats) error {
	enc := func(r runStats) []byte {
		b, _ := json.Marshal(statsRecord{N: r.n, MeanNs: int64(r.mean)})
		return b
	}
	return db.Update(func(tx *bolt.Tx) error {
		ob, err := tx.CreateBucketIfNotExists(bktObserved)
		if err != nil {
			return err
		}
		if start.n > 0 {
			if err := ob.Put(keyStart, enc(start)); err != nil {
				return err
			}
		}
		rb, err := ob.CreateBucketIfNotExists(bktRuns)
		if err != nil {
			return err
		}
		for id, r := range runs {
			if err := rb.Put([]byte(id), enc(r)); err != nil {
				return err
			}
		}
		return nil
	})
}

// saveObservations writes what changed since the last write, at most every
// observeSaveEvery unless final (Run ending).
func (e *engine) saveObservations(now time.Time, final bool) {
	if !e.observedDirty || (!final && now.Sub(e.observedSaved) < observeSaveEvery && !e.observedSaved.After(now)) {
		return
	}
	if err := saveObserved(e.store.DB(), e.runs, e.starts); err != nil {
		e.log.Warn("observed run durations not saved", "err", err)
		return
	}
	e.observedDirty, e.observedSaved = false, now
}

// estimateOf is an item's expected run time and how many observed runs it
// rests on: the longest mean of its capabilities, or the configured
// Estimate (resting on none) while one of them has no completed run.
func (e *engine) estimateOf(en queue.Entry) (time.Duration, int) {
	var est time.Duration
	runs := 0
	for i, c := range en.Capabilities {
		r := e.runs[c.ID]
		if r.n == 0 {
			return e.cfg.Estimate, 0
		}
		est = max(est, r.mean)
		if i == 0 || r.n < runs {
			runs = r.n
		}
	}
	if runs == 0 {
		return e.cfg.Estimate, 0
	}
	return est, runs
}

// observeRun records a completed run's duration for the item's
// capabilities; the waiting items' estimates follow (a material change of
// their disclosure is posted as usual).
func (e *engine) observeRun(it *item, now time.Time) {
	en, ok := e.store.Item(it.key.group, it.key.id)
	if !ok || it.startedAt.IsZero() {
		return
	}
	d := now.Sub(it.startedAt)
	if d < 0 {
		return // the clock stepped back during the run: no duration to learn
	}
	e.observedDirty = true
	for _, c := range en.Capabilities {
		r := e.runs[c.ID]
		r.add(d)
		e.runs[c.ID] = r
	}
	for _, x := range e.items {
		if x.inSched && (x.Phase == phQueued || x.Phase == phAccepting) {
			if xe, ok := e.store.Item(x.key.group, x.key.id); ok {
				e.enqueue(x, xe, now)
			}
		}
	}
}

// observeStart records how long a pick took to get its lease: the start
// latency of every disclosed start window.
func (e *engine) observeStart(it *item, now time.Time) {
	if it.pickedAt.IsZero() {
		return
	}
	if d := now.Sub(it.pickedAt); d >= 0 {
		e.starts.add(d)
		e.observedDirty = true
	}
	e.sched.SetStartLatency(e.starts.mean)
}
