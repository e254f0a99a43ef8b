package poc

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// Timeline geometry, in SVG user units.
const (
	tlWidth    = 960.0
	tlLabelW   = 150.0
	tlRightPad = 24.0
	tlTop      = 60.0
	tlRowH     = 28.0
	tlBarH     = 16.0
	tlMaxTicks = 8
)

// groupPalette is the Okabe–Ito palette: distinguishable with the common
// colour-vision deficiencies. Groups take colours in id order.
var groupPalette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

// WriteTimeline renders r's timeline and writes it to path atomically
// (internal/atomicfile), so a reader never sees half a picture.
func WriteTimeline(path string, r *Report) error {
	var buf bytes.Buffer
	if err := RenderTimeline(&buf, r); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("poc: write timeline: %w", err)
	}
	return nil
}

// RenderTimeline writes a self-contained SVG of r: one row per slot of
// every worker, one bar per run coloured by Group and labelled with its
// stage, a red mark where a run was preempted, a cross where it failed,
// expired or was interrupted, the stalled part of a run whose lease was let
// lapse hatched, a named marker at each injected fault and a dashed line at
// each human decision. Idle spans are compressed to a labelled break so the
// width goes to the work. The output depends only on r.
func RenderTimeline(w io.Writer, r *Report) error {
	from, to := r.Span()
	for _, in := range r.Injections {
		from, to = minNonZero(from, in.At.Time), maxTime(to, in.At.Time)
	}
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	rows := slices.Clone(r.Slots)
	slices.SortStableFunc(rows, func(a, b SlotUsage) int {
		if a.Worker != b.Worker {
			return strings.Compare(a.Worker, b.Worker)
		}
		return a.Slot - b.Slot
	})
	var busy [][2]time.Time
	for _, s := range rows {
		for _, iv := range s.Intervals {
			busy = append(busy, [2]time.Time{iv.From.Time, iv.To.Time})
		}
	}
	var points []time.Time
	for _, a := range r.Approvals {
		points = append(points, a.At.Time)
	}
	for _, in := range r.Injections {
		points = append(points, in.At.Time)
	}
	ax := newAxis(from, to, busy, points, tlLabelW, tlWidth-tlRightPad)
	names := stageNames(r)
	colors := groupColors(r)
	faultLevels := placeLabels(r.Injections, ax)
	top := tlTop + 16 + 14*float64(faultLevels)
	plotBottom := top + tlRowH*float64(max(len(rows), 1))
	groups := sortedGroupIDs(colors)
	origin, _ := r.Span()
	off := func(t time.Time) string {
		if d := t.Sub(origin); d < 0 {
			return "-" + fmtSpan(-d)
		}
		return "+" + fmtSpan(t.Sub(origin))
	}
	// Below the plot: offsets, idle breaks, then one line per human
	// decision (its dashed line ends there), then the notes, each wrapped
	// to the width: contention, preemptions, faults, stages, legend.
	decisionTop := plotBottom + 46
	var notes []note
	if c := r.Contention; c != nil {
		label := fmt.Sprintf("contention (yellow) %s to %s:", off(origin.Add(time.Duration(c.FromMs)*time.Millisecond)), off(origin.Add(time.Duration(c.ToMs)*time.Millisecond)))
		for _, g := range c.Groups {
			label += fmt.Sprintf(" %s %.0f%% of slot-time (weight %.0f%%, longest-queue-first %.0f%%);", g.GroupID, 100*g.SlotShare, 100*g.WeightShare, 100*g.LQFShare)
		}
		notes = append(notes, wrapNote(strings.TrimSuffix(label, ";"), "#7a5d00", "")...)
	}
	for i, p := range r.Preemptions {
		line := fmt.Sprintf("P%d preemption of %s (%s, %s): busy %s into its run, asked at %s; safe point %s (%s later); slot freed %s; %s started %s",
			i+1, orItem(p.Stage, p.Victim), p.Group, p.Phase, fmtMs(p.BusyMs), off(p.RequestedAt.Time), off(p.SafePointAt.Time), fmtMs(p.ToSafePointMs),
			optOff(p.SlotFreedAt, off), p.For, optOff(p.ForStartedAt, off))
		notes = append(notes, wrapNote(line, "#d00000", "")...)
	}
	if len(r.Injections) > 0 {
		var parts []string
		for i, in := range r.Injections {
			parts = append(parts, fmt.Sprintf("%d %s %s", i+1, in.Fault, off(in.At.Time)))
		}
		notes = append(notes, wrapNote("faults (red lines): "+strings.Join(parts, " · "), "#d00000", "")...)
	}
	for _, m := range r.Missions {
		notes = append(notes, wrapNote(fmt.Sprintf("%s stages: %s", m.ID, stageList(m, off)), "#333", "")...)
	}
	for _, g := range groups {
		label := g
		for _, gs := range r.Groups {
			if gs.ID == g {
				label = fmt.Sprintf("%s: weight %d (%.1f%% of weights), %.1f%% of slot-time, %d preemption(s), wait p50 %s max %s",
					g, gs.Weight, 100*gs.WeightShare, 100*gs.Share, gs.Preemptions, fmtMs(gs.WaitP50Ms), fmtMs(gs.WaitMaxMs))
			}
		}
		notes = append(notes, wrapNote(label, "#000", colors[g])...)
	}
	notesTop := decisionTop + 14*float64(len(r.Approvals)) + 6
	height := notesTop + tlNoteH*float64(len(notes)) + 8

	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", tlWidth, height, tlWidth, height)
	p(`<defs><pattern id="stall" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="3" height="6" fill="#ffffff" fill-opacity="0.7"/></pattern></defs>` + "\n")
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="12" y="22" font-size="15" font-weight="bold">PoC run: slot occupancy</text>` + "\n")
	p(`<text x="12" y="40" fill="#555">%s to %s (%.1fs)</text>`+"\n", esc(wireTime(from)), esc(wireTime(to)), to.Sub(from).Seconds())
	p(`<text x="12" y="56" fill="#555" font-size="11">▼ preempted (P: see below) · ✕ failed, lease expired or interrupted · hatched: stalled · red line: fault · dashed: human decision · grey: idle, compressed</text>` + "\n")
	if c := r.Contention; c != nil {
		x0, x1 := ax.x(origin.Add(time.Duration(c.FromMs)*time.Millisecond)), ax.x(origin.Add(time.Duration(c.ToMs)*time.Millisecond))
		p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fff3b0" fill-opacity="0.6"><title>contention window</title></rect>`+"\n", x0, top-6, max(x1-x0, 1), plotBottom-top+6)
	}
	renderAxis(p, ax, from, top, plotBottom)
	renderFaults(p, r.Injections, ax, top, plotBottom)

	preempted := map[string]int{} // group/item/safe point -> P number
	for i, pm := range r.Preemptions {
		preempted[pm.Group+"/"+pm.Victim+"/"+wireTime(pm.SafePointAt.Time)] = i + 1
	}
	for i, s := range rows {
		y := top + tlRowH*float64(i)
		by := y + (tlRowH-tlBarH)/2
		p(`<text x="12" y="%.1f">%s / slot %d</text>`+"\n", by+12, esc(s.Worker), s.Slot)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ccc"/>`+"\n", tlLabelW, y+tlRowH, tlWidth-tlRightPad, y+tlRowH)
		for _, iv := range s.Intervals {
			mark := 0
			if iv.Outcome == OutcomePreempted {
				for k, n := range preempted {
					if strings.HasPrefix(k, iv.Group+"/"+iv.Item+"/") && pmWithin(r.Preemptions[n-1], iv) {
						mark = n
					}
				}
			}
			renderRun(p, iv, ax, by, colors[iv.Group], names[iv.Group+"/"+iv.Item], stallFrom(r.Injections, iv), mark)
			if mark > 0 {
				pm := r.Preemptions[mark-1]
				// A red bar under the run from the request to the critical
				// item's start: the whole cooperative handover.
				end := pm.SafePointAt.Time
				if pm.ForStartedAt != nil {
					end = pm.ForStartedAt.Time
				}
				x0, x1 := ax.x(pm.RequestedAt.Time), ax.x(end)
				p(`<rect x="%.1f" y="%.1f" width="%.1f" height="2" fill="#d00000"><title>P%d: request to %s started</title></rect>`+"\n", x0, by+tlBarH+1, max(x1-x0, 1), mark, esc(pm.For))
			}
		}
	}

	for i, a := range r.Approvals {
		x := ax.x(a.At.Time)
		color := "#11703a"
		if a.Decision != "approved" {
			color = "#b35c00"
		}
		ly := decisionTop + 14*float64(i)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="5 3"/>`+"\n", x, top-6, x, ly-10, color)
		// Labels right of the middle hang to the left so they stay inside.
		tx, anchor := x+3, "start"
		if x > (tlLabelW+tlWidth-tlRightPad)/2 {
			tx, anchor = x-3, "end"
		}
		p(`<text x="%.1f" y="%.1f" fill="%s" text-anchor="%s">%s</text>`+"\n", tx, ly, color, anchor, esc(fmt.Sprintf("%s %s %s", a.Mission, a.Decision, off(a.At.Time))))
	}
	for i, n := range notes {
		ly := notesTop + tlNoteH*float64(i)
		x := 12.0
		if n.swatch != "" {
			p(`<rect x="12" y="%.1f" width="10" height="10" fill="%s"/>`, ly-9, n.swatch)
			x = 28
		} else if n.cont {
			x = 28
		}
		p(`<text x="%.1f" y="%.1f" fill="%s" font-size="11">%s</text>`+"\n", x, ly, n.color, esc(n.text))
	}
	p("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// tlNoteH is the line height of the notes under the plot; tlNoteChars how
// many characters of 11-unit text fit on a line (6.3 units a character is
// a safe overestimate for sans-serif).
const (
	tlNoteH     = 15.0
	tlNoteChars = 146 // (tlWidth - 28 - 12) / 6.3
)

// note is one line of text under the plot; cont marks a wrapped line's
// continuation, swatch a legend colour.
type note struct {
	text, color, swatch string
	cont                bool
}

// wrapNote breaks text into lines of at most tlNoteChars (continuations
// indented), between its " · " parts where it can, else between words.
func wrapNote(text, color, swatch string) []note {
	var out []note
	line, width := "", tlNoteChars
	emit := func() {
		out = append(out, note{text: line, color: color, swatch: swatch, cont: len(out) > 0})
		swatch, line, width = "", "", tlNoteChars-3
	}
	for i, part := range strings.Split(text, " · ") {
		sep := ""
		if i > 0 {
			sep = " · "
		}
		if line != "" && len([]rune(line+sep+part)) > width {
			emit()
			sep = ""
		}
		for _, w := range strings.Fields(part) {
			if line != "" && len([]rune(line+sep+w)) > width {
				emit()
				sep = ""
			}
			if line != "" && sep == "" {
				sep = " "
			}
			line += sep + w
			sep = ""
		}
	}
	if line != "" || len(out) == 0 {
		emit()
	}
	return out
}

// stageList names every stage of m with when it ran; runs of load stages
// are one entry ("load 1–16 +3.7s–7.4s").
func stageList(m MissionReport, off func(time.Time) string) string {
	var parts []string
	when := func(s StageReport) string {
		if s.StartedAt == nil {
			return "not run"
		}
		if s.FinishedAt == nil {
			return off(s.StartedAt.Time) + "–"
		}
		return off(s.StartedAt.Time) + "–" + strings.TrimPrefix(off(s.FinishedAt.Time), "+")
	}
	for i := 0; i < len(m.Stages); i++ {
		s := m.Stages[i]
		if n, ok := loadNumber(s.Name); ok {
			j, first, last := i, s, s
			for j+1 < len(m.Stages) {
				if _, ok := loadNumber(m.Stages[j+1].Name); !ok {
					break
				}
				j++
				last = m.Stages[j]
			}
			if j > i {
				from, to := first, first
				for _, x := range m.Stages[i : j+1] {
					if x.StartedAt != nil && (from.StartedAt == nil || x.StartedAt.Before(from.StartedAt.Time)) {
						from = x
					}
					if x.FinishedAt != nil && (to.FinishedAt == nil || x.FinishedAt.After(to.FinishedAt.Time)) {
						to = x
					}
				}
				span := StageReport{StartedAt: from.StartedAt, FinishedAt: to.FinishedAt}
				ln, _ := loadNumber(last.Name)
				parts = append(parts, fmt.Sprintf("load %d–%d %s", n, ln, when(span)))
				i = j
				continue
			}
		}
		parts = append(parts, s.Name+" "+when(s))
	}
	return strings.Join(parts, " · ")
}

// loadNumber is n for a stage named "load n".
func loadNumber(name string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(name, "load %d", &n); err != nil || fmt.Sprintf("load %d", n) != name {
		return 0, false
	}
	return n, true
}

func orItem(stage, item string) string {
	if stage == "" {
		return item
	}
	return stage
}

func optOff(t *protocol.Time, off func(time.Time) string) string {
	if t == nil {
		return "-"
	}
	return off(t.Time)
}

// pmWithin reports whether preemption pm ended run iv.
func pmWithin(pm PreemptionMoment, iv Interval) bool {
	return pm.Group == iv.Group && pm.Victim == iv.Item && !pm.RequestedAt.Before(iv.From.Time) && !pm.SafePointAt.After(iv.To.Time)
}

// renderAxis draws gridlines and offsets on the proportional spans and a
// zigzag break labelled with its length on each compressed one.
func renderAxis(p func(string, ...any), ax axis, from time.Time, top, bottom float64) {
	step := tickStep(ax.worked())
	lastLabel := 0.0
	for _, s := range ax.segs {
		if s.idle {
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f0f0f0"><title>%s idle</title></rect>`+"\n", s.x0+2, top-6, s.x1-s.x0-4, bottom-top+6, fmtSpan(s.to.Sub(s.from)))
			p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#777" font-size="10">%s idle</text>`+"\n", (s.x0+s.x1)/2, bottom+28, fmtSpan(s.to.Sub(s.from)))
			lastLabel = s.x1 // the offset after a break would collide with the one before it
			continue
		}
		first := s.from.Sub(from).Truncate(step)
		if first < s.from.Sub(from) {
			first += step
		}
		for t := first; !from.Add(t).After(s.to); t += step {
			x := ax.x(from.Add(t))
			if x-lastLabel < 40 && lastLabel > 0 {
				continue
			}
			lastLabel = x
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", x, top-6, x, bottom)
			p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">+%s</text>`+"\n", x, bottom+14, fmtOffset(t))
		}
	}
}

// renderRun draws one run: its bar, its stage name when it fits, the
// hatched stall and the mark of how it ended.
func renderRun(p func(string, ...any), iv Interval, ax axis, by float64, color, stage string, stall time.Time, mark int) {
	x0, x1 := ax.x(iv.From.Time), ax.x(iv.To.Time)
	wdt := max(x1-x0, 1)
	opacity := "1"
	if iv.Outcome == OutcomeRunning {
		opacity = "0.55"
	}
	name := stage
	if name == "" {
		name = iv.Item
	}
	p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="2" fill="%s" fill-opacity="%s"><title>%s</title></rect>`+"\n",
		x0, by, wdt, tlBarH, color, opacity,
		esc(fmt.Sprintf("%s %s (%s) %s to %s: %s", name, iv.Item, iv.Group, wireTime(iv.From.Time), wireTime(iv.To.Time), iv.Outcome)))
	if !stall.IsZero() {
		sx := ax.x(stall)
		p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#stall)"><title>stalled: lease let lapse</title></rect>`+"\n", sx, by, max(x1-sx, 1), tlBarH)
	}
	// 6.5 units a character at font-size 10 is a safe overestimate. A
	// preempted run names its preemption (P1 …), before its stage when both fit.
	label := name
	if mark > 0 {
		label = fmt.Sprintf("P%d %s", mark, name)
		if float64(len([]rune(label)))*6.5+6 > wdt {
			label = fmt.Sprintf("P%d", mark)
		}
	}
	if float64(len([]rune(label)))*6.5+6 <= wdt {
		p(`<text x="%.1f" y="%.1f" fill="#ffffff" font-size="10">%s</text>`+"\n", x0+3, by+tlBarH-4, esc(label))
	} else if mark > 0 {
		p(`<text x="%.1f" y="%.1f" fill="#d00000" font-size="10" text-anchor="end">%s</text>`+"\n", x0-2, by+tlBarH-4, esc(label))
	}
	switch iv.Outcome {
	case OutcomePreempted:
		p(`<path d="M%.1f %.1f l-5 -7 h10 z" fill="#d00000"><title>preempted</title></path>`+"\n", x0+wdt, by)
	case OutcomeFailed, OutcomeExpired, OutcomeInterrupted:
		p(`<path d="M%.1f %.1f l8 8 m0 -8 l-8 8" stroke="#d00000" stroke-width="2"><title>%s</title></path>`+"\n", x0+wdt-4, by+tlBarH/2-4, esc(string(iv.Outcome)))
	}
}

// renderFaults draws a line across the slots at each injection and, above
// them, its number in the list under the plot; injections closer than a
// label's width share one label ("3,4,5"), on the level placeLabels gave it.
func renderFaults(p func(string, ...any), ins []Injection, ax axis, top, bottom float64) {
	for i, in := range ins {
		x := ax.x(in.At.Time)
		what := fmt.Sprintf("%d %s", i+1, in.Fault)
		if in.WorkItem != "" {
			what += " " + in.WorkItem
		}
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d00000" stroke-opacity="0.6"><title>%s</title></line>`+"\n", x, top-8, x, bottom, esc(what+" at "+wireTime(in.At.Time)+" "+in.Detail))
	}
	for _, l := range faultLabels(ins, ax) {
		ly := top - 10 - 14*float64(l.level)
		p(`<text x="%.1f" y="%.1f" fill="#d00000" font-size="10">%s</text>`+"\n", l.x+2, ly, esc(l.text))
	}
}

// faultLabel is the label of one or more injections drawn at x.
type faultLabel struct {
	x     float64
	text  string
	level int
}

// faultLabels groups injections (in time order) whose lines are closer
// than the label of the group so far, and puts each group's label on the
// lowest level where it does not overlap the labels before it.
func faultLabels(ins []Injection, ax axis) []faultLabel {
	order := make([]int, len(ins))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return ins[a].At.Time.Compare(ins[b].At.Time) })
	width := func(text string) float64 { return 4 + 6*float64(len(text)) }
	var out []faultLabel
	for _, i := range order {
		x, num := ax.x(ins[i].At.Time), strconv.Itoa(i+1)
		if n := len(out); n > 0 && x < out[n-1].x+width(out[n-1].text) {
			out[n-1].text += "," + num
			continue
		}
		out = append(out, faultLabel{x: x, text: num})
	}
	var ends []float64 // per level, where its last label ends
	for k := range out {
		level := slices.IndexFunc(ends, func(e float64) bool { return e < out[k].x })
		if level < 0 {
			level = len(ends)
			ends = append(ends, 0)
		}
		ends[level] = out[k].x + width(out[k].text)
		out[k].level = level
	}
	return out
}

// placeLabels is how many label levels the fault labels need.
func placeLabels(ins []Injection, ax axis) int {
	n := 0
	for _, l := range faultLabels(ins, ax) {
		n = max(n, l.level+1)
	}
	return n
}

// stallFrom is when run iv was stalled by the lease-expiry fault (zero if
// it was not): from the moment its worker was cut off (Since, else the
// record's time) until the lease ran out.
func stallFrom(ins []Injection, iv Interval) time.Time {
	for _, in := range ins {
		at := in.At.Time
		if in.Since != nil {
			at = in.Since.Time
		}
		if in.Fault == FaultLeaseExpiry && in.Group == iv.Group && in.WorkItem == iv.Item &&
			!at.Before(iv.From.Time) && at.Before(iv.To.Time) {
			return at
		}
	}
	return time.Time{}
}

// stageNames maps "group/workItemId" to the stage's name.
func stageNames(r *Report) map[string]string {
	out := map[string]string{}
	for _, m := range r.Missions {
		for _, s := range m.Stages {
			out[m.Group+"/"+s.WorkItemID] = s.Name
		}
	}
	return out
}

func minNonZero(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func fmtSpan(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func groupColors(r *Report) map[string]string {
	letters := groupLetters(r) // the same Group set and order as the text strips
	ids := sortedGroupIDs(letters)
	out := make(map[string]string, len(ids))
	for i, id := range ids {
		out[id] = groupPalette[i%len(groupPalette)]
	}
	return out
}

func sortedGroupIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// tickStep picks a round gridline step giving at most tlMaxTicks lines.
func tickStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{
		100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour,
	} {
		if span/s < tlMaxTicks {
			return s
		}
	}
	return span / tlMaxTicks
}

func fmtOffset(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", int64(d/time.Second))
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func wireTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func esc(s string) string { return html.EscapeString(terminalSafe(s)) }
