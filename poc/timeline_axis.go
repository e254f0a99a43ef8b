package poc

import (
	"slices"
	"time"
)

// tlBreakW is the width an idle span is drawn at once compressed.
const tlBreakW = 34.0

// axis maps run time to x so the width goes to the work: spans where
// nothing runs and nothing happens, longer than minGap, are drawn as a
// fixed-width break labelled with their length; the rest keeps its
// proportions.
type axis struct {
	segs []axisSeg
}

type axisSeg struct {
	from, to time.Time
	x0, x1   float64
	idle     bool // compressed to a break
}

// newAxis lays out [from, to] over [left, right]. busy are the spans where
// something ran; points are moments (faults, decisions) that must stay on a
// proportional part of the axis.
func newAxis(from, to time.Time, busy [][2]time.Time, points []time.Time, left, right float64) axis {
	span := to.Sub(from)
	if span <= 0 {
		return axis{segs: []axisSeg{{from: from, to: from.Add(time.Second), x0: left, x1: right}}}
	}
	// A point keeps a margin of 1% of the span around it.
	margin := span / 100
	spans := slices.Clone(busy)
	for _, p := range points {
		spans = append(spans, [2]time.Time{p.Add(-margin), p.Add(margin)})
	}
	slices.SortFunc(spans, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
	minGap := max(time.Second, span/10)
	// Walk the merged busy spans; every gap longer than minGap is idle.
	var segs []axisSeg
	cur := from
	add := func(a, b time.Time, idle bool) {
		if b.After(a) {
			segs = append(segs, axisSeg{from: a, to: b, idle: idle})
		}
	}
	end := from
	for _, s := range spans {
		a, b := maxTime(s[0], from), minTime(s[1], to)
		if !b.After(a) {
			continue
		}
		if a.Sub(end) > minGap {
			add(cur, end, false)
			add(end, a, true)
			cur = a
		}
		end = maxTime(end, b)
	}
	if to.Sub(end) > minGap {
		add(cur, end, false)
		add(end, to, true)
	} else {
		add(cur, to, false)
	}
	// Widths: breaks fixed, the rest in proportion to its duration.
	var worked time.Duration
	breaks := 0
	for _, s := range segs {
		if s.idle {
			breaks++
		} else {
			worked += s.to.Sub(s.from)
		}
	}
	free := right - left - tlBreakW*float64(breaks)
	x := left
	for i := range segs {
		s := &segs[i]
		s.x0 = x
		if s.idle {
			x += tlBreakW
		} else if worked > 0 {
			x += free * float64(s.to.Sub(s.from)) / float64(worked)
		}
		s.x1 = x
	}
	return axis{segs: segs}
}

// x is where t is drawn; times outside the axis are clamped to its ends.
func (a axis) x(t time.Time) float64 {
	for _, s := range a.segs {
		if t.After(s.to) {
			continue
		}
		if !t.After(s.from) {
			return s.x0
		}
		return s.x0 + (s.x1-s.x0)*float64(t.Sub(s.from))/float64(s.to.Sub(s.from))
	}
	return a.segs[len(a.segs)-1].x1
}

// worked is the total duration drawn in proportion (not compressed).
func (a axis) worked() time.Duration {
	var d time.Duration
	for _, s := range a.segs {
		if !s.idle {
			d += s.to.Sub(s.from)
		}
	}
	return d
}
