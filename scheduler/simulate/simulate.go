// Package simulate runs the real scheduler against a workload on a simulated
// clock: the what-if tool behind `mwp-worker scheduler simulate`, and the
// harness the scheduler's own property tests drive.
package simulate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/missionweave/mwp-worker/scheduler"
)

// Input is the workload file.
type Input struct {
	Slots        int         `json:"slots"`
	Groups       []GroupSpec `json:"groups"`
	Items        []ItemSpec  `json:"items"`
	CheckpointMs int64       `json:"checkpointMs"`
}

// GroupSpec is one Group of the workload.
type GroupSpec struct {
	ID     string `json:"id"`
	Weight int64  `json:"weight"`
	Quota  *int   `json:"quota,omitempty"`
}

// ItemSpec is one WorkItem: it arrives at ArrivalMs and needs DurationMs of
// slot-time; DeadlineMs is absolute on the simulated clock.
type ItemSpec struct {
	ID          string `json:"id"`
	Group       string `json:"group"`
	Urgency     string `json:"urgency"`
	ArrivalMs   *int64 `json:"arrivalMs"`
	DurationMs  *int64 `json:"durationMs"`
	DeadlineMs  *int64 `json:"deadlineMs,omitempty"`
	Preemptible *bool  `json:"preemptible,omitempty"`
}

// Limits that keep a hostile file from exhausting memory or time.
const (
	MaxSlots  = 4096
	MaxItems  = 1_000_000
	MaxTimeMs = int64(1) << 50 // ~35,000 years
)

// Decode reads and checks a workload: strict JSON (unknown members, trailing
// data and type mismatches are errors), then the semantic checks of Check.
func Decode(r io.Reader) (*Input, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var in Input
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("invalid workload JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid workload JSON: data after the top-level object")
	}
	if err := in.Check(); err != nil {
		return nil, err
	}
	return &in, nil
}

// Check validates a workload and names the first problem.
func (in *Input) Check() error {
	if in.Slots < 1 || in.Slots > MaxSlots {
		return fmt.Errorf("slots must be between 1 and %d, got %d", MaxSlots, in.Slots)
	}
	if in.CheckpointMs < 0 || in.CheckpointMs > MaxTimeMs {
		return fmt.Errorf("checkpointMs must be between 0 and %d, got %d", MaxTimeMs, in.CheckpointMs)
	}
	if len(in.Groups) == 0 {
		return errors.New("groups: at least one group is required")
	}
	if len(in.Items) > MaxItems {
		return fmt.Errorf("items: at most %d, got %d", MaxItems, len(in.Items))
	}
	groups := map[string]bool{}
	for i, g := range in.Groups {
		switch {
		case g.ID == "":
			return fmt.Errorf("groups[%d]: id is required", i)
		case groups[g.ID]:
			return fmt.Errorf("groups[%d]: duplicate group id %q", i, g.ID)
		case g.Weight < 1:
			return fmt.Errorf("group %q: weight must be a positive integer, got %d", g.ID, g.Weight)
		case g.Quota != nil && *g.Quota < 1:
			return fmt.Errorf("group %q: quota must be at least 1, got %d", g.ID, *g.Quota)
		}
		groups[g.ID] = true
	}
	items := map[string]bool{}
	for i, it := range in.Items {
		where := fmt.Sprintf("items[%d]", i)
		if it.ID != "" {
			where = fmt.Sprintf("item %q", it.ID)
		}
		if _, err := scheduler.ParseUrgency(it.Urgency); err != nil {
			return fmt.Errorf("%s: unknown urgency %q (want low, normal, high or critical)", where, it.Urgency)
		}
		switch {
		case it.ID == "":
			return fmt.Errorf("%s: id is required", where)
		case items[it.ID]:
			return fmt.Errorf("%s: duplicate item id", where)
		case it.Group == "":
			return fmt.Errorf("%s: group is required", where)
		case !groups[it.Group]:
			return fmt.Errorf("%s: unknown group %q", where, it.Group)
		case it.ArrivalMs == nil:
			return fmt.Errorf("%s: arrivalMs is required", where)
		case it.DurationMs == nil:
			return fmt.Errorf("%s: durationMs is required", where)
		}
		if err := checkTime(where, "arrivalMs", *it.ArrivalMs); err != nil {
			return err
		}
		if err := checkTime(where, "durationMs", *it.DurationMs); err != nil {
			return err
		}
		if it.DeadlineMs != nil {
			if err := checkTime(where, "deadlineMs", *it.DeadlineMs); err != nil {
				return err
			}
		}
		items[it.ID] = true
	}
	return nil
}

func checkTime(where, field string, v int64) error {
	if v < 0 || v > MaxTimeMs {
		return fmt.Errorf("%s: %s must be between 0 and %d, got %d", where, field, MaxTimeMs, v)
	}
	return nil
}

// Event is one decision, printed as one JSON line.
type Event struct {
	AtMs   int64  `json:"atMs"`
	Action string `json:"action"` // start | preempt | finish
	Item   string `json:"item"`
	Group  string `json:"group"`
	Slot   int    `json:"slot"`
	// For is, on a preempt, the waiting item the victim's slot is asked
	// for (a later preempt of the same victim names the item it is for
	// then: the first may have started elsewhere meanwhile).
	For string `json:"for,omitempty"`
}

// GroupSummary is one Group's outcome.
type GroupSummary struct {
	ID             string  `json:"id"`
	Weight         int64   `json:"weight"`
	WeightShare    float64 `json:"weightShare"`
	Items          int     `json:"items"`
	SlotTimeMs     int64   `json:"slotTimeMs"`
	Share          float64 `json:"share"` // of all slot-time used
	MaxWaitMs      int64   `json:"maxWaitMs"`
	MeanWaitMs     float64 `json:"meanWaitMs"`
	DeadlineMisses int     `json:"deadlineMisses"`
	Preemptions    int     `json:"preemptions"`
}

// Summary closes the output.
type Summary struct {
	EndMs          int64          `json:"endMs"`
	SlotTimeMs     int64          `json:"slotTimeMs"`
	Groups         []GroupSummary `json:"groups"`
	DeadlineMisses int            `json:"deadlineMisses"`
	Preemptions    int            `json:"preemptions"`
}

// ItemResult is one item's outcome; wait is first start minus arrival.
type ItemResult struct {
	ID, Group    string
	ArrivalMs    int64
	FirstStartMs int64
	FinishMs     int64
	DeadlineMs   int64 // -1: none
	Missed       bool
	Preemptions  int
}

// Stay is one stay of an item in a slot, from start to finish or checkpoint.
type Stay struct {
	Item, Group string
	Slot        int
	StartMs     int64
	EndMs       int64
}

// Result is a whole run.
type Result struct {
	Events  []Event
	Stays   []Stay       // in end order
	Items   []ItemResult // input order
	Summary Summary
}

// Options tune the scheduler the simulation drives; the zero value is the
// scheduler's defaults.
type Options struct {
	Config scheduler.Config // Slots is taken from the workload
	// EventLimit bounds the run; zero means 20 million events.
	EventLimit int
}

// Run simulates the workload with default options.
func Run(in *Input) (*Result, error) { return RunWith(in, Options{}) }

// timer kinds, in the order they apply at one instant.
const (
	kindFinish = iota
	kindCheckpoint
)

type timer struct {
	at   int64
	kind int
	seq  int // tie-break: order of scheduling
	item int
	run  int // stale when the item has started another run since
}

type itemState struct {
	spec       *ItemSpec
	remaining  int64
	run        int
	runStart   int64
	slot       int
	firstStart int64
	finish     int64
	preempts   int
	done       bool
}

// RunWith simulates the workload: items arrive, the scheduler starts them in
// free slots, preempted items reach their checkpoint checkpointMs later, free
// their slot and resume later with their remaining duration.
func RunWith(in *Input, opt Options) (*Result, error) {
	if err := in.Check(); err != nil {
		return nil, err
	}
	cfg := opt.Config
	cfg.Slots = in.Slots
	cfg.SlotResources = nil
	s, err := scheduler.New(cfg)
	if err != nil {
		return nil, err
	}
	for _, g := range in.Groups {
		gc := scheduler.GroupConfig{Weight: g.Weight}
		if g.Quota != nil {
			gc.Quota = *g.Quota
		}
		if err := s.SetGroup(g.ID, gc); err != nil {
			return nil, err
		}
	}
	limit := opt.EventLimit
	if limit == 0 {
		limit = 20_000_000
	}

	st := make([]itemState, len(in.Items))
	byID := make(map[string]int, len(in.Items))
	arrivals := make([]int, len(in.Items))
	for i := range in.Items {
		st[i] = itemState{spec: &in.Items[i], remaining: *in.Items[i].DurationMs, firstStart: -1, slot: -1}
		byID[in.Items[i].ID] = i
		arrivals[i] = i
	}
	sort.SliceStable(arrivals, func(a, b int) bool {
		return *in.Items[arrivals[a]].ArrivalMs < *in.Items[arrivals[b]].ArrivalMs
	})

	res := &Result{}
	var timers timerHeap
	seq := 0
	addTimer := func(at int64, kind, item int) {
		seq++
		timers.push(timer{at: at, kind: kind, seq: seq, item: item, run: st[item].run})
	}
	emitFor := func(at int64, action string, i int, forItem string) error {
		if len(res.Events) >= limit {
			return fmt.Errorf("simulation exceeded %d events", limit)
		}
		res.Events = append(res.Events, Event{AtMs: at, Action: action, Item: st[i].spec.ID, Group: st[i].spec.Group, Slot: st[i].slot, For: forItem})
		return nil
	}
	emit := func(at int64, action string, i int) error { return emitFor(at, action, i, "") }
	slotTime := map[string]int64{}
	endRun := func(i int, at int64) {
		res.Stays = append(res.Stays, Stay{Item: st[i].spec.ID, Group: st[i].spec.Group, Slot: st[i].slot, StartMs: st[i].runStart, EndMs: at})
		ran := at - st[i].runStart
		st[i].remaining -= ran
		slotTime[st[i].spec.Group] += ran
	}

	next, doneCount := 0, 0
	for doneCount < len(st) {
		t := int64(-1)
		if next < len(arrivals) {
			t = *in.Items[arrivals[next]].ArrivalMs
		}
		if tm, ok := timers.peek(); ok && (t < 0 || tm.at < t) {
			t = tm.at
		}
		if t < 0 {
			return nil, errors.New("simulation stalled with unfinished items")
		}
		for tm, ok := timers.peek(); ok && tm.at == t; tm, ok = timers.peek() {
			timers.pop()
			i := tm.item
			if st[i].done || st[i].run != tm.run || st[i].slot < 0 {
				continue // superseded: finished before its checkpoint, or restarted
			}
			switch tm.kind {
			case kindFinish:
				if err := emit(t, "finish", i); err != nil {
					return nil, err
				}
				endRun(i, t)
				if err := s.Finish(st[i].spec.ID, ms(t)); err != nil {
					return nil, err
				}
				st[i].done, st[i].finish, st[i].slot = true, t, -1
				doneCount++
			case kindCheckpoint:
				if err := release(s, st, i, t, endRun); err != nil {
					return nil, err
				}
			}
		}
		for ; next < len(arrivals) && *in.Items[arrivals[next]].ArrivalMs == t; next++ {
			i := arrivals[next]
			if err := s.Enqueue(toItem(st[i].spec), ms(t)); err != nil {
				return nil, err
			}
		}
		for {
			if d, ok := s.Next(ms(t)); ok {
				i := byID[d.Item]
				st[i].run++
				st[i].runStart, st[i].slot = t, d.Slot
				if st[i].firstStart < 0 {
					st[i].firstStart = t
				}
				if err := emit(t, "start", i); err != nil {
					return nil, err
				}
				addTimer(t+st[i].remaining, kindFinish, i)
				continue
			}
			p, ok := s.Preempt(ms(t))
			if !ok {
				break
			}
			i := byID[p.Item]
			st[i].preempts++
			if err := emitFor(t, "preempt", i, p.For); err != nil {
				return nil, err
			}
			// The item keeps working until its safe point; if it completes
			// first, its finish timer wins (finish applies before checkpoint).
			if t+in.CheckpointMs < st[i].runStart+st[i].remaining {
				if in.CheckpointMs == 0 {
					if err := release(s, st, i, t, endRun); err != nil {
						return nil, err
					}
				} else {
					addTimer(t+in.CheckpointMs, kindCheckpoint, i)
				}
			}
		}
	}
	res.Items, res.Summary = summarize(in, st, slotTime)
	if len(res.Events) > 0 {
		res.Summary.EndMs = res.Events[len(res.Events)-1].AtMs
	}
	return res, nil
}

func release(s *scheduler.Scheduler, st []itemState, i int, t int64, endRun func(int, int64)) error {
	endRun(i, t)
	id := st[i].spec.ID
	if err := s.Release(id, ms(t)); err != nil {
		return err
	}
	st[i].slot = -1
	st[i].run++ // invalidates the finish timer of the run that just ended
	est := time.Duration(max(st[i].remaining, 1)) * time.Millisecond
	return s.Update(id, scheduler.Change{Estimate: &est}, ms(t))
}

func ms(t int64) time.Time { return time.UnixMilli(t).UTC() }

func toItem(spec *ItemSpec) scheduler.Item {
	u, _ := scheduler.ParseUrgency(spec.Urgency) // checked by Check
	it := scheduler.Item{
		ID: spec.ID, Group: spec.Group, Urgency: u, Impact: scheduler.ImpactMedium,
		// The workload states each duration; the simulation shows the policy
		// with exact estimates, not estimation error.
		Estimate:    time.Duration(max(*spec.DurationMs, 1)) * time.Millisecond,
		Preemptible: spec.Preemptible == nil || *spec.Preemptible,
	}
	if spec.DeadlineMs != nil {
		it.Deadline = ms(*spec.DeadlineMs)
	}
	return it
}

func summarize(in *Input, st []itemState, slotTime map[string]int64) ([]ItemResult, Summary) {
	var sum Summary
	var totalWeight int64
	for _, g := range in.Groups {
		totalWeight += g.Weight
		sum.SlotTimeMs += slotTime[g.ID]
	}
	idx := map[string]int{}
	for i, g := range in.Groups {
		idx[g.ID] = i
		sum.Groups = append(sum.Groups, GroupSummary{
			ID: g.ID, Weight: g.Weight, WeightShare: round4(float64(g.Weight) / float64(totalWeight)),
			SlotTimeMs: slotTime[g.ID],
		})
		if sum.SlotTimeMs > 0 {
			sum.Groups[i].Share = round4(float64(slotTime[g.ID]) / float64(sum.SlotTimeMs))
		}
	}
	items := make([]ItemResult, len(st))
	waitTotal := make([]int64, len(in.Groups))
	for i := range st {
		sp := st[i].spec
		r := ItemResult{
			ID: sp.ID, Group: sp.Group, ArrivalMs: *sp.ArrivalMs, FirstStartMs: st[i].firstStart,
			FinishMs: st[i].finish, DeadlineMs: -1, Preemptions: st[i].preempts,
		}
		gs := &sum.Groups[idx[sp.Group]]
		if sp.DeadlineMs != nil {
			r.DeadlineMs = *sp.DeadlineMs
			r.Missed = r.FinishMs > r.DeadlineMs
		}
		wait := r.FirstStartMs - r.ArrivalMs
		gs.Items++
		gs.MaxWaitMs = max(gs.MaxWaitMs, wait)
		waitTotal[idx[sp.Group]] += wait
		gs.Preemptions += r.Preemptions
		sum.Preemptions += r.Preemptions
		if r.Missed {
			gs.DeadlineMisses++
			sum.DeadlineMisses++
		}
		items[i] = r
	}
	for i := range sum.Groups {
		if n := sum.Groups[i].Items; n > 0 {
			sum.Groups[i].MeanWaitMs = round4(float64(waitTotal[i]) / float64(n))
		}
	}
	return items, sum
}

func round4(x float64) float64 {
	const f = 10000
	v := x * f
	if v < 0 {
		return -float64(int64(-v+0.5)) / f
	}
	return float64(int64(v+0.5)) / f
}

// WriteJSON prints one JSON object per event, then {"summary": ...}.
func WriteJSON(w io.Writer, r *Result) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range r.Events {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	if err := enc.Encode(struct {
		Summary Summary `json:"summary"`
	}{r.Summary}); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

type timerHeap []timer

func (h timerHeap) less(i, j int) bool {
	a, b := h[i], h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}

func (h *timerHeap) push(t timer) {
	*h = append(*h, t)
	a := *h
	for j := len(a) - 1; j > 0; {
		i := (j - 1) / 2
		if !a.less(j, i) {
			break
		}
		a[i], a[j] = a[j], a[i]
		j = i
	}
}

func (h timerHeap) peek() (timer, bool) {
	if len(h) == 0 {
		return timer{}, false
	}
	return h[0], true
}

func (h *timerHeap) pop() {
	a := *h
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && a.less(r, l) {
			j = r
		}
		if !a.less(j, i) {
			break
		}
		a[i], a[j] = a[j], a[i]
		i = j
	}
	*h = a
}
