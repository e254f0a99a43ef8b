package poc

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// stripWidth is the number of time buckets in a slot's occupancy strip.
const stripWidth = 48

// WriteText renders r as terminal tables: missions and their stages, the
// fault suite, invariants, per-slot occupancy over time (one letter per
// Group, '.' idle), Group shares against weights, approvals, and a closing
// verdict. Times are offsets from the first run, so two runs compare.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	from, to := r.Span()
	off := func(t time.Time) string {
		if from.IsZero() {
			return t.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("+%.1fs", t.Sub(from).Seconds())
	}
	letters := groupLetters(r)

	var tw *tabwriter.Writer
	section := func(title string, header ...string) {
		ew.printf("\n%s\n", title)
		tw = tabwriter.NewWriter(ewWriter{ew}, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	row := func(cells ...string) {
		for i := range cells {
			cells[i] = tableSafe(cells[i])
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	flush := func() { _ = tw.Flush() }

	section("MISSIONS", "MISSION", "GROUP", "FINAL", "STAGE", "ITEM", "STATE", "START", "END", "WORKER/SLOT", "HANDLER")
	for _, m := range r.Missions {
		if len(m.Stages) == 0 {
			row(m.ID, m.Group, m.FinalState, "-", "", "", "", "", "", "")
		}
		for i, s := range m.Stages {
			id, group, final := m.ID, m.Group, m.FinalState
			if i > 0 {
				id, group, final = "", "", ""
			}
			start, end, where := "-", "-", "-"
			if s.StartedAt != nil {
				start = off(s.StartedAt.Time)
			}
			if s.FinishedAt != nil {
				end = off(s.FinishedAt.Time)
			}
			if s.Slot != nil {
				where = fmt.Sprintf("%s/%d", s.Worker, *s.Slot)
			}
			row(id, group, final, s.Name, s.WorkItemID, s.State, start, end, where, s.Handler)
		}
	}
	flush()

	section("FAULTS", "FAULT", "INJECTED", "HELD", "DETAIL")
	for _, f := range r.Faults {
		row(f.Name, yesNo(f.Injected), yesNo(f.Held), f.Detail)
	}
	flush()

	section("INVARIANTS", "INVARIANT", "HELD", "DETAIL")
	for _, inv := range r.Invariants {
		row(inv.Name, yesNo(inv.Held), inv.Detail)
	}
	flush()

	section("SLOTS", "WORKER", "SLOT", "BUSY", "RUNS", "OCCUPANCY "+legend(letters))
	for _, s := range r.Slots {
		row(s.Worker, fmt.Sprint(s.Slot), fmt.Sprintf("%.0f%%", 100*s.Busy(from, to)), fmt.Sprint(len(s.Intervals)), "|"+occupancyStrip(s, from, to, letters)+"|")
	}
	flush()

	section("GROUPS", "GROUP", "WEIGHT", "WEIGHT SHARE", "SLOT SHARE", "SLOT TIME", "RUNS", "WAIT P50", "WAIT MAX", "PREEMPTIONS")
	for _, g := range r.Groups {
		row(g.ID, fmt.Sprint(g.Weight), fmt.Sprintf("%.1f%%", 100*g.WeightShare), fmt.Sprintf("%.1f%%", 100*g.Share),
			fmtMs(g.SlotMs), fmt.Sprint(g.Runs), fmtMs(g.WaitP50Ms), fmtMs(g.WaitMaxMs), fmt.Sprint(g.Preemptions))
	}
	flush()

	if c := r.Contention; c != nil {
		section("CONTENTION", "GROUP", "WEIGHT SHARE", "SLOT SHARE", "LONGEST QUEUE FIRST", "SLOT TIME", "RUNS", "CARRIED IN")
		for _, g := range c.Groups {
			row(g.GroupID, fmt.Sprintf("%.1f%%", 100*g.WeightShare), fmt.Sprintf("%.1f%%", 100*g.SlotShare), fmt.Sprintf("%.1f%%", 100*g.LQFShare),
				fmtMs(g.SlotMs), fmt.Sprint(g.Runs), fmtMs(g.CarriedMs))
		}
		flush()
		verdict := "within"
		if !c.Within {
			verdict = "NOT within"
		}
		ew.printf("every Group had work waiting from %s to %s (%s): the slot shares (of the runs started in it, and the time in it of those carried in) are %s %.0f points of the weight shares\n",
			off(from.Add(time.Duration(c.FromMs)*time.Millisecond)), off(from.Add(time.Duration(c.ToMs)*time.Millisecond)), fmtMs(c.ToMs-c.FromMs), verdict, 100*ContentionTolerance)
	}

	if len(r.Preemptions) > 0 {
		section("PREEMPTIONS", "VICTIM", "STAGE", "PHASE", "FOR", "RUN START", "REQUEST", "SAFE POINT", "SLOT FREED", "STARTED")
		opt := func(t *protocol.Time) string {
			if t == nil {
				return "-"
			}
			return off(t.Time)
		}
		for _, p := range r.Preemptions {
			row(p.Group+"/"+p.Victim, p.Stage, p.Phase, p.For, off(p.RunStartedAt.Time), off(p.RequestedAt.Time),
				fmt.Sprintf("%s (+%s)", off(p.SafePointAt.Time), fmtMs(p.ToSafePointMs)), opt(p.SlotFreedAt), opt(p.ForStartedAt))
		}
		flush()
	}

	section("APPROVALS", "MISSION", "GROUP", "AT", "DECISION")
	for _, a := range r.Approvals {
		row(a.Mission, a.Group, off(a.At.Time), a.Decision)
	}
	flush()

	if problems := r.Problems(); len(problems) == 0 {
		ew.printf("\nRESULT: ok (every chosen fault injected and held, every invariant held)\n")
	} else {
		unfair := ""
		if c := r.Contention; c != nil && !c.Within {
			unfair = ", contention not within the weight shares"
		}
		ew.printf("\nRESULT: FAILED (%d fault(s) not injected or not held, %d invariant(s) did not hold%s)\n", r.failedFaults(), r.failedInvariants(), unfair)
		for _, p := range problems {
			ew.printf("  %s\n", tableSafe(p))
		}
	}
	return ew.err
}

// ewWriter adapts errWriter to io.Writer for tabwriter.
type ewWriter struct{ e *errWriter }

func (w ewWriter) Write(p []byte) (int, error) {
	if w.e.err != nil {
		return 0, w.e.err
	}
	n, err := w.e.w.Write(p)
	w.e.err = err
	return n, err
}

func (r *Report) failedFaults() int {
	n := 0
	for _, f := range r.Faults {
		if !f.Injected || !f.Held {
			n++
		}
	}
	return n
}

func (r *Report) failedInvariants() int {
	n := 0
	for _, inv := range r.Invariants {
		if !inv.Held {
			n++
		}
	}
	return n
}

// groupLetters gives each Group (sorted by id) a letter for the strips.
func groupLetters(r *Report) map[string]byte {
	var ids []string
	for _, g := range r.Groups {
		ids = append(ids, g.ID)
	}
	for _, s := range r.Slots {
		for _, iv := range s.Intervals {
			ids = append(ids, iv.Group)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make(map[string]byte, len(ids))
	for i, id := range ids {
		out[id] = '#'
		if i < 26 {
			out[id] = byte('A' + i)
		}
	}
	return out
}

func legend(letters map[string]byte) string {
	var parts []string
	for id, l := range letters {
		parts = append(parts, fmt.Sprintf("%c=%s", l, id))
	}
	slices.Sort(parts)
	return "(" + strings.Join(parts, " ") + ")"
}

// occupancyStrip draws one character per time bucket: the letter of the
// Group that ran longest in it, or '.' when the slot was idle.
func occupancyStrip(s SlotUsage, from, to time.Time, letters map[string]byte) string {
	span := to.Sub(from)
	if span <= 0 {
		return strings.Repeat(".", stripWidth)
	}
	var b strings.Builder
	for k := range stripWidth {
		bs := from.Add(span * time.Duration(k) / stripWidth)
		be := from.Add(span * time.Duration(k+1) / stripWidth)
		best, bestDur := byte('.'), time.Duration(0)
		for _, iv := range s.Intervals {
			a, e := maxTime(iv.From.Time, bs), minTime(iv.To.Time, be)
			if d := e.Sub(a); d > bestDur {
				best, bestDur = letters[iv.Group], d
			}
		}
		b.WriteByte(best)
	}
	return b.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func fmtMs(ms int64) string {
	return fmt.Sprintf("%.1fs", float64(ms)/1000)
}

// tableSafe keeps untrusted text from breaking the table (tabs, newlines)
// or driving the terminal (escape sequences).
func tableSafe(s string) string { return terminalSafe(s) }
