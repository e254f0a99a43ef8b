package poc

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

func at(sec float64) protocol.Time {
	return protocol.NewTime(t0.Add(time.Duration(sec * float64(time.Second))))
}

func ptrTime(sec float64) *protocol.Time { t := at(sec); return &t }

func iv(item, group string, from, to float64, o Outcome) Interval {
	return Interval{Item: item, Group: group, From: at(from), To: at(to), Outcome: o}
}

// sampleReport is a small run: two Groups on one worker with two slots,
// one preemption, one human request for changes and one approval.
func sampleReport() *Report {
	slot0, slot1 := 0, 1
	slots := []SlotUsage{
		{Worker: "worker-1", Slot: 0, Intervals: []Interval{
			iv("wi-a1", "grp-a", 0, 4, OutcomeSubmitted),
			iv("wi-b1", "grp-b", 4, 6, OutcomePreempted),
			iv("wi-a2", "grp-a", 6, 10, OutcomeSubmitted),
		}},
		{Worker: "worker-1", Slot: 1, Intervals: []Interval{
			iv("wi-b0", "grp-b", 0, 3, OutcomeSubmitted),
			iv("wi-b1", "grp-b", 7, 9, OutcomeSubmitted),
			iv("wi-a3", "grp-a", 9, 12, OutcomeExpired),
		}},
	}
	arrivals := []Arrival{
		{Item: "wi-a1", Group: "grp-a", At: t0}, {Item: "wi-b0", Group: "grp-b", At: t0},
		{Item: "wi-b1", Group: "grp-b", At: t0.Add(time.Second)}, {Item: "wi-a2", Group: "grp-a", At: t0.Add(3 * time.Second)},
		{Item: "wi-a3", Group: "grp-a", At: t0.Add(8 * time.Second)},
	}
	return &Report{
		Missions: []MissionReport{
			{ID: "mis-a", Group: "grp-a", FinalState: "approved", Stages: []StageReport{
				{WorkItemID: "wi-a1", Name: "requirements", State: "verified", StartedAt: ptrTime(0), FinishedAt: ptrTime(4), Worker: "worker-1", Slot: &slot0},
				{WorkItemID: "wi-a2", Name: "implementation", State: "verified", StartedAt: ptrTime(6), FinishedAt: ptrTime(10), Worker: "worker-1", Slot: &slot0},
				{WorkItemID: "wi-a3", Name: "tests", State: "queued"},
			}},
			{ID: "mis-b", Group: "grp-b", FinalState: "active", Stages: []StageReport{
				{WorkItemID: "wi-b1", Name: "implementation", State: "submitted", StartedAt: ptrTime(4), FinishedAt: ptrTime(9), Worker: "worker-1", Slot: &slot1},
			}},
		},
		Faults: []FaultResult{
			{Name: "duplicate event delivery", Injected: true, Held: true, Detail: "3 duplicates dropped by eventId"},
			{Name: "group disconnect", Injected: false, Held: false, Detail: "not run"},
		},
		Invariants: []InvariantResult{{Name: "no duplicate side effects", Held: true, Detail: "toolkey ledger: 0 repeats"}},
		Slots:      slots,
		Groups:     ComputeGroups(slots, arrivals, map[string]int64{"grp-a": 2, "grp-b": 1}, t0.Add(12*time.Second)),
		Contention: ComputeContention(slots, arrivals, map[string]int64{"grp-a": 2, "grp-b": 1}, t0, t0.Add(12*time.Second)),
		Approvals: []ApprovalMoment{
			{Mission: "mis-a", Group: "grp-a", At: at(10.5), Decision: "changes_requested"},
			{Mission: "mis-a", Group: "grp-a", At: at(11.5), Decision: "approved"},
		},
	}
}

func TestComputeGroupsByHand(t *testing.T) {
	got := sampleReport().Groups
	// grp-a: runs 4+4+3 = 11 s; grp-b: 2+3+2 = 7 s; 18 s in all.
	// grp-a waits: a1 0, a2 6-3 = 3 s, a3 9-8 = 1 s, a3 expired at 12 and
	// still queued at end (12): 0. grp-b waits: b0 0, b1 4-1 = 3 s,
	// b1 preempted at 6 and restarted at 7: 1 s.
	want := []GroupShare{
		{ID: "grp-a", Weight: 2, SlotMs: 11000, Share: 11.0 / 18, WeightShare: 2.0 / 3, Runs: 3, Waits: 4, WaitP50Ms: 0, WaitMaxMs: 3000, Preemptions: 0},
		{ID: "grp-b", Weight: 1, SlotMs: 7000, Share: 7.0 / 18, WeightShare: 1.0 / 3, Runs: 3, Waits: 3, WaitP50Ms: 1000, WaitMaxMs: 3000, Preemptions: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ComputeGroups =\n%+v\nwant\n%+v", got, want)
	}
}

func TestComputeGroupsEdges(t *testing.T) {
	end := t0.Add(time.Minute)
	if got := ComputeGroups(nil, nil, nil, end); len(got) != 0 {
		t.Errorf("empty input gave %+v", got)
	}
	// A Group with weight and nothing run has share 0 and its weight share.
	got := ComputeGroups(nil, []Arrival{{Item: "x", Group: "g2", At: t0}}, map[string]int64{"g1": 3, "g2": 1}, end)
	want := []GroupShare{{ID: "g1", Weight: 3, WeightShare: 0.75}, {ID: "g2", Weight: 1, WeightShare: 0.25, Waits: 1, WaitP50Ms: 60000, WaitMaxMs: 60000}}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// An interval whose end precedes its start counts as no time.
	got = ComputeGroups([]SlotUsage{{Intervals: []Interval{iv("x", "g", 5, 4, OutcomeSubmitted)}}}, nil, nil, end)
	if len(got) != 1 || got[0].SlotMs != 0 || got[0].Share != 0 || got[0].Weight != 0 {
		t.Errorf("got %+v", got)
	}
}

func TestReportJSONShape(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	dec := json.NewDecoder(&buf)
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value written")
	}
	keys := func(v any) string {
		m := v.(map[string]any)
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return strings.Join(ks, ",")
	}
	first := func(name string) any { return doc[name].([]any)[0] }
	for _, c := range []struct{ got, want string }{
		{keys(doc), "approvals,contention,faults,groups,injections,invariants,missions,ok,preemptions,problems,slots"},
		{keys(doc["contention"]), "fromMs,groups,toMs,withinTolerance"},
		{keys(doc["contention"].(map[string]any)["groups"].([]any)[0]), "carriedMs,groupId,longestQueueFirstShare,runs,slotMs,slotShare,weightShare"},
		{keys(first("missions")), "finalState,group,id,stages"},
		{keys(first("missions").(map[string]any)["stages"].([]any)[0]), "finishedAt,handler,name,slot,startedAt,state,workItemId,worker"},
		{keys(first("missions").(map[string]any)["stages"].([]any)[2]), "handler,name,state,workItemId"},
		{keys(first("faults")), "detail,evidence,held,injected,name"},
		{keys(first("invariants")), "detail,held,name"},
		{keys(first("slots")), "intervals,slot,worker"},
		{keys(first("slots").(map[string]any)["intervals"].([]any)[0]), "from,group,item,outcome,to"},
		{keys(first("groups")), "id,preemptions,runs,share,slotMs,waitMaxMs,waitP50Ms,waits,weight,weightShare"},
		{keys(first("approvals")), "at,decision,group,mission"},
	} {
		if c.got != c.want {
			t.Errorf("members %s, want %s", c.got, c.want)
		}
	}
	if from := first("slots").(map[string]any)["intervals"].([]any)[0].(map[string]any)["from"]; from != "2026-11-30T08:00:00Z" {
		t.Errorf("interval time %v is not a wire time", from)
	}

	// Empty lists are [] and a decoded report round-trips.
	buf.Reset()
	if err := (&Report{Slots: []SlotUsage{{Worker: "w"}}}).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); strings.Contains(s, "null") || !strings.Contains(s, `"intervals": []`) {
		t.Errorf("empty report: %s", s)
	}
	r := sampleReport()
	buf.Reset()
	_ = r.WriteJSON(&buf)
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	_ = back.WriteJSON(&again)
	if again.String() != buf.String() {
		t.Errorf("round trip changed the report:\n%s\n%s", buf.String(), again.String())
	}
}

// makeFair gives the sample's contention window (too short to be fair)
// the weight shares.
func makeFair(r *Report) {
	for i := range r.Contention.Groups {
		r.Contention.Groups[i].SlotShare = r.Contention.Groups[i].WeightShare
	}
	r.Contention.Within = true
}

func TestReportText(t *testing.T) {
	r := sampleReport()
	makeFair(r)
	r.Faults[0].Detail = "tab\there\x1b[31m"
	r.Faults[1].Injected, r.Faults[1].Held = true, true
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"MISSIONS", "FAULTS", "INVARIANTS", "SLOTS", "GROUPS", "APPROVALS",
		"mis-a", "requirements", "+6.0s", "worker-1/0",
		"(A=grp-a B=grp-b)",
		// Slot 0 over 12 s in 48 buckets: a1 0–4 s, b1 4–6 s, a2 6–10 s, idle after.
		"|" + strings.Repeat("A", 16) + strings.Repeat("B", 8) + strings.Repeat("A", 16) + strings.Repeat(".", 8) + "|",
		"61.1%", "66.7%", "changes_requested", "+11.5s",
		"RESULT: ok",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsRune(out, 0x1b) || strings.Contains(out, "tab\there") {
		t.Errorf("control characters reached the table:\n%q", out)
	}
	r.Invariants[0].Held = false
	buf.Reset()
	_ = r.WriteText(&buf)
	if !strings.Contains(buf.String(), "RESULT: FAILED (0 fault(s) not injected or not held, 1 invariant(s) did not hold)") || r.OK() {
		t.Errorf("failed run not reported:\n%s", buf.String())
	}
}

// TestReportVerdict: a chosen fault that was not injected fails the run as
// surely as one that did not hold, in the text, in the JSON and in OK, and
// each problem names its fault or invariant.
func TestReportVerdict(t *testing.T) {
	for _, c := range []struct {
		name     string
		change   func(r *Report)
		ok       bool
		problems []string
	}{
		{"all held", func(*Report) {}, true, nil},
		{"not injected", func(r *Report) { r.Faults[0].Injected, r.Faults[0].Held = false, false }, false,
			[]string{"fault duplicate event delivery not injected: 3 duplicates dropped by eventId"}},
		{"injected, not held", func(r *Report) { r.Faults[0].Held = false }, false,
			[]string{"fault duplicate event delivery did not hold: 3 duplicates dropped by eventId"}},
		{"invariant", func(r *Report) { r.Invariants[0].Held = false }, false,
			[]string{"invariant no duplicate side effects did not hold: toolkey ledger: 0 repeats"}},
		{"contention off its weights", func(r *Report) {
			r.Contention.Groups[0].SlotShare, r.Contention.Groups[1].SlotShare, r.Contention.Within = 0.5, 0.5, false
		}, false, []string{
			"contention not fair: grp-a had 0.500 of the slot-time against a weight share of 0.667 (more than 10 points off)",
			"contention not fair: grp-b had 0.500 of the slot-time against a weight share of 0.333 (more than 10 points off)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sampleReport()
			r.Faults = r.Faults[:1]
			makeFair(r)
			c.change(r)
			if r.OK() != c.ok || !slices.Equal(r.Problems(), c.problems) {
				t.Fatalf("ok %v problems %q, want %v %q", r.OK(), r.Problems(), c.ok, c.problems)
			}
			var text, js bytes.Buffer
			_ = r.WriteText(&text)
			_ = r.WriteJSON(&js)
			var doc struct {
				OK       bool     `json:"ok"`
				Problems []string `json:"problems"`
			}
			if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.OK != c.ok || len(doc.Problems) != len(c.problems) {
				t.Errorf("json ok %v problems %q", doc.OK, doc.Problems)
			}
			if strings.Contains(text.String(), "RESULT: ok") != c.ok {
				t.Errorf("text verdict wrong:\n%s", text.String())
			}
			for _, p := range c.problems {
				if !strings.Contains(text.String(), p) {
					t.Errorf("text does not name %q:\n%s", p, text.String())
				}
			}
		})
	}
}

func TestSlotBusyAndSpan(t *testing.T) {
	r := sampleReport()
	from, to := r.Span()
	if !from.Equal(t0) || !to.Equal(t0.Add(12*time.Second)) {
		t.Fatalf("span %s..%s", from, to)
	}
	if b := r.Slots[0].Busy(from, to); b != 10.0/12 {
		t.Errorf("busy %v", b)
	}
	if b := r.Slots[0].Busy(to, from); b != 0 {
		t.Errorf("inverted window busy %v", b)
	}
	if f, tt := (&Report{}).Span(); !f.IsZero() || !tt.IsZero() {
		t.Errorf("empty span %s %s", f, tt)
	}
}
