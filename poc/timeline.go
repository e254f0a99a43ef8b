package poc

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
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
// (temporary file, fsync, rename), so a reader never sees half a picture.
func WriteTimeline(path string, r *Report) error {
	var buf bytes.Buffer
	if err := RenderTimeline(&buf, r); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".timeline-*.svg")
	if err != nil {
		return fmt.Errorf("poc: write timeline: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("poc: write timeline: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("poc: write timeline: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("poc: write timeline: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("poc: write timeline: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("poc: write timeline: %w", err)
	}
	return nil
}

// RenderTimeline writes a self-contained SVG of r: one row per worker slot,
// one bar per run coloured by Group, a red mark where a run was preempted,
// a cross where it failed, expired or was interrupted, and a dashed line at
// each human approval decision. The output depends only on r.
func RenderTimeline(w io.Writer, r *Report) error {
	from, to := r.Span()
	span := to.Sub(from)
	if span <= 0 {
		span = time.Second
	}
	plotW := tlWidth - tlLabelW - tlRightPad
	x := func(t time.Time) float64 { return tlLabelW + plotW*float64(t.Sub(from))/float64(span) }
	rows := slices.Clone(r.Slots)
	slices.SortStableFunc(rows, func(a, b SlotUsage) int {
		if a.Worker != b.Worker {
			return strings.Compare(a.Worker, b.Worker)
		}
		return a.Slot - b.Slot
	})
	colors := groupColors(r)
	plotBottom := tlTop + tlRowH*float64(max(len(rows), 1))
	groups := sortedGroupIDs(colors)
	legendTop := plotBottom + 40 + 14*float64(len(r.Approvals))
	height := legendTop + 16*float64(len(groups)) + 8

	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", tlWidth, height, tlWidth, height)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="12" y="22" font-size="15" font-weight="bold">PoC run: slot occupancy</text>` + "\n")
	p(`<text x="12" y="40" fill="#555">%s to %s (%.1fs); ▼ preempted, ✕ failed / lease expired / interrupted, dashed line: human decision</text>`+"\n",
		esc(wireTime(from)), esc(wireTime(to)), span.Seconds())
	// Time axis: gridlines at a round step.
	step := tickStep(span)
	for t := time.Duration(0); t <= span; t += step {
		tx := x(from.Add(t))
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", tx, tlTop-6, tx, plotBottom)
		p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">+%s</text>`+"\n", tx, plotBottom+14, fmtOffset(t))
	}

	for i, s := range rows {
		y := tlTop + tlRowH*float64(i)
		by := y + (tlRowH-tlBarH)/2
		p(`<text x="12" y="%.1f">%s / slot %d</text>`+"\n", by+12, esc(s.Worker), s.Slot)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ccc"/>`+"\n", tlLabelW, y+tlRowH, tlWidth-tlRightPad, y+tlRowH)
		for _, iv := range s.Intervals {
			x0, x1 := x(iv.From.Time), x(iv.To.Time)
			wdt := max(x1-x0, 1)
			opacity := "1"
			if iv.Outcome == OutcomeRunning {
				opacity = "0.55"
			}
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="2" fill="%s" fill-opacity="%s"><title>%s</title></rect>`+"\n",
				x0, by, wdt, tlBarH, colors[iv.Group], opacity,
				esc(fmt.Sprintf("%s (%s) %s to %s: %s", iv.Item, iv.Group, wireTime(iv.From.Time), wireTime(iv.To.Time), iv.Outcome)))
			switch iv.Outcome {
			case OutcomePreempted:
				p(`<path d="M%.1f %.1f l-5 -7 h10 z" fill="#d00000"><title>preempted</title></path>`+"\n", x0+wdt, by)
			case OutcomeFailed, OutcomeExpired, OutcomeInterrupted:
				p(`<path d="M%.1f %.1f l8 8 m0 -8 l-8 8" stroke="#d00000" stroke-width="2"><title>%s</title></path>`+"\n", x0+wdt-4, by+tlBarH/2-4, esc(string(iv.Outcome)))
			}
		}
	}

	for i, a := range r.Approvals {
		ax := x(a.At.Time)
		color := "#11703a"
		if a.Decision != "approved" {
			color = "#b35c00"
		}
		ly := plotBottom + 32 + 14*float64(i)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="5 3"/>`+"\n", ax, tlTop-6, ax, ly-10, color)
		// Labels right of the middle hang to the left so they stay inside.
		tx, anchor := ax+3, "start"
		if ax > tlLabelW+plotW/2 {
			tx, anchor = ax-3, "end"
		}
		p(`<text x="%.1f" y="%.1f" fill="%s" text-anchor="%s">%s</text>`+"\n", tx, ly, color, anchor, esc(fmt.Sprintf("%s %s", a.Mission, a.Decision)))
	}
	for i, g := range groups {
		label := g
		for _, gs := range r.Groups {
			if gs.ID == g {
				label = fmt.Sprintf("%s: weight %d (%.1f%% of weights), %.1f%% of slot-time, %d preemption(s), wait p50 %s max %s",
					g, gs.Weight, 100*gs.WeightShare, 100*gs.Share, gs.Preemptions, fmtMs(gs.WaitP50Ms), fmtMs(gs.WaitMaxMs))
			}
		}
		ly := legendTop + 16*float64(i)
		p(`<rect x="12" y="%.1f" width="10" height="10" fill="%s"/><text x="28" y="%.1f">%s</text>`+"\n", ly, colors[g], ly+9, esc(label))
	}
	p("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
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
