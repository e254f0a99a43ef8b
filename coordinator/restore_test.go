package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/protocol"
)

// A coordinator restarted on a Group whose log the authority compacted
// (retention) restores the snapshot CURSOR_TOO_OLD names, reads on after
// it and drives the Mission to approval without repeating a step of the
// first one. Without the restore the second Run stops with
// CURSOR_TOO_OLD.
func TestRestartOnCompactedLogRestoresSnapshot(t *testing.T) {
	p := mustPlan(t, "../examples/plans/bugfix.yaml")
	for _, k := range []int{4, 7, 11} {
		t.Run(fmt.Sprintf("stop-after-%d", k), func(t *testing.T) {
			r := newRigConfig(t, p, authoritylite.Config{})
			ctx, cancel := context.WithCancel(r.ctx)
			defer cancel()
			caps := capsOf(p)
			workers := []*fakeWorker{r.worker("w1", caps, nil), r.worker("w2", caps, nil)}
			cfg := r.coordinator("c1", "w1", "w2")
			direct := cfg.Authority
			rec := &recorder{Authority: direct, stopAfter: k}
			cfg.Authority = rec
			first, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx1, stop1 := context.WithCancel(ctx)
			rec.stop = stop1
			errc := make(chan error, 1)
			go func() { errc <- first.Run(ctx1) }()
			r.start("c1")
			for _, w := range workers {
				go w.run(ctx)
			}
			go r.approve(ctx)
			select {
			case <-errc:
			case <-time.After(60 * time.Second):
				t.Fatalf("the first coordinator never sent %d commands\n%s", k, r.dump())
			}

			g := p.Mission.GroupID
			last := r.svc.LastSequence(g)
			ref, err := r.svc.Compact(g, 2)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := direct.Events(ctx, g, 0, 0); protocol.CodeOf(err) != protocol.CodeCursorTooOld {
				t.Fatalf("a read from 0 after compaction at %d: %v, want CURSOR_TOO_OLD", last, err)
			}

			cfg.Authority = direct
			second, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			go func() { errc <- second.Run(ctx) }()
			r.waitMission(protocol.MissionApproved, errc)
			if err := <-errc; err != nil {
				t.Fatalf("second Run: %v", err)
			}
			if second.v.lastSeq <= ref.Sequence {
				t.Errorf("the second coordinator ended at %d, not past the snapshot at %d", second.v.lastSeq, ref.Sequence)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, err := range rec.refused {
				if protocol.CodeOf(err) == protocol.CodeActionIDCollision {
					t.Errorf("an action id was reused with other bytes: %v", err)
				}
			}
		})
	}
}
