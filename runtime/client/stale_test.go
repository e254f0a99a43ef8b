package client

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/queue"
)

func TestPendingStale(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		issuedAt  time.Time
		now       time.Time
		freshness time.Duration
		want      bool
	}{
		{"inside the window", at, at.Add(time.Minute), time.Minute, false},
		{"past the window", at, at.Add(time.Minute + time.Millisecond), time.Minute, true},
		{"no limit", at, at.Add(time.Hour), 0, false},
		{"issuedAt unknown", time.Time{}, at, time.Minute, false},
	} {
		p := &pendingCmd{issuedAt: tc.issuedAt}
		if got := p.stale(tc.now, tc.freshness); got != tc.want {
			t.Errorf("%s: stale %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOutboxPutIssuedAt(t *testing.T) {
	p, err := queue.NewOutboxPut([]byte(`{"actionId":"act-1","groupId":"grp-a","issuedAt":"2026-11-30T08:00:00.250Z"}`))
	if err != nil || !p.IssuedAt.Equal(time.Date(2026, 11, 30, 8, 0, 0, 250e6, time.UTC)) {
		t.Fatalf("issuedAt %v, err %v", p.IssuedAt, err)
	}
}
