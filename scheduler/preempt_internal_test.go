package scheduler

import (
	"math"
	"testing"
	"time"
)

// prioCmp's rank, row by row, at now = 1000 with a 100 ms slack window: an
// item is pressed when overdue (aging key ≤ now) or when its latest start
// (deadline − estimate) is ≤ now + window.
func TestPrioCmp(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Slots: 1, SlackWindow: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const now, far, none = 1000, 1 << 40, math.MaxInt64
	mk := func(ta, dl, est int64, u Urgency, i Impact) *entry {
		return &entry{ta: ta, dl: dl, est: est, item: Item{Urgency: u, Impact: i}}
	}
	idle := mk(far, none, 50, UrgencyNormal, ImpactMedium)
	for _, tc := range []struct {
		name string
		a, b *entry
		want int // the sign of prioCmp(a, b)
	}{
		{"overdue at its aging key ranks above the unpressed", mk(now, none, 50, UrgencyLow, ImpactLow), idle, 1},
		{"one millisecond before its aging key it is not pressed", mk(now+1, none, 50, UrgencyLow, ImpactLow), idle, -1},
		{"the unpressed ranks below the overdue", idle, mk(now, none, 50, UrgencyLow, ImpactLow), -1},
		{"latest start at now+window is pressed", mk(far, now+100+50, 50, UrgencyLow, ImpactLow), idle, 1},
		{"latest start a millisecond later is not", mk(far, now+100+51, 50, UrgencyLow, ImpactLow), mk(far, none, 50, UrgencyLow, ImpactLow), 0},
		{"both racing deadlines: the earlier deadline", mk(far, now+120, 50, UrgencyLow, ImpactLow), mk(far, now+130, 50, UrgencyCritical, ImpactCritical), 1},
		{"both racing deadlines: the later deadline", mk(far, now+130, 50, UrgencyCritical, ImpactCritical), mk(far, now+120, 50, UrgencyLow, ImpactLow), -1},
		{"both racing the same deadline: urgency does not count", mk(far, now+120, 50, UrgencyCritical, ImpactCritical), mk(far, now+120, 50, UrgencyLow, ImpactLow), 0},
		{"overdue and deadline-pressed: by urgency", mk(now, none, 50, UrgencyLow, ImpactLow), mk(far, now+120, 50, UrgencyHigh, ImpactLow), -1},
		{"unpressed: higher urgency", mk(far, none, 50, UrgencyHigh, ImpactLow), mk(far, none, 50, UrgencyLow, ImpactCritical), 1},
		{"unpressed: lower urgency", mk(far, none, 50, UrgencyLow, ImpactCritical), mk(far, none, 50, UrgencyHigh, ImpactLow), -1},
		{"same urgency: higher impact", mk(far, none, 50, UrgencyNormal, ImpactHigh), mk(far, none, 50, UrgencyNormal, ImpactLow), 1},
		{"same urgency: lower impact", mk(far, none, 50, UrgencyNormal, ImpactLow), mk(far, none, 50, UrgencyNormal, ImpactHigh), -1},
		{"equal", idle, mk(far, none, 50, UrgencyNormal, ImpactMedium), 0},
	} {
		got := s.prioCmp(tc.a, tc.b, now)
		if sign(got) != tc.want {
			t.Errorf("%s: prioCmp = %d, want sign %d", tc.name, got, tc.want)
		}
	}
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// A queued item justifies a preemption when it is overdue, racing its
// deadline or handed a slot, or when it is critical.
func TestPressing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode pickMode
		u    Urgency
		want bool
	}{
		{modeUrgency, UrgencyHigh, false},
		{modeUrgency, UrgencyCritical, true},
		{modeAging, UrgencyLow, true},
		{modeEDF, UrgencyLow, true},
	} {
		if got := pressing(&entry{item: Item{Urgency: tc.u}}, tc.mode); got != tc.want {
			t.Errorf("pressing(%v, mode %d) = %v, want %v", tc.u, tc.mode, got, tc.want)
		}
	}
}
