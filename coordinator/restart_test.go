package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// recorder passes commands through and remembers each one the authority
// accepted; after stopAfter of them it cancels the coordinator.
type recorder struct {
	Authority
	mu        sync.Mutex
	accepted  []protocol.Command
	refused   []error
	stopAfter int
	stop      context.CancelFunc
}

func (r *recorder) Submit(ctx context.Context, raw []byte) (*protocol.Receipt, error) {
	rc, err := r.Authority.Submit(ctx, raw)
	var cmd protocol.Command
	if jerr := json.Unmarshal(raw, &cmd); jerr != nil {
		return nil, jerr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.refused = append(r.refused, fmt.Errorf("%s %s: %w", cmd.Type, cmd.ActionID, err))
		return rc, err
	}
	r.accepted = append(r.accepted, cmd)
	if len(r.accepted) == r.stopAfter && r.stop != nil {
		r.stop()
	}
	if len(r.accepted) > maxCommands {
		return nil, protocol.Errorf(protocol.CodeAuthStaleCoordinator, "runaway: more than %d commands", maxCommands)
	}
	return rc, err
}

// maxCommands is far more than a plan of a few stages needs: a
// coordinator past it repeats itself.
const maxCommands = 200

// target is what a command acts on: its type and the item or agent.
func target(c protocol.Command) string {
	var p struct {
		WorkItemID string         `json:"workItemId"`
		Principal  protocol.Actor `json:"principal"`
		Package    struct {
			Scope   protocol.ContextScope `json:"scope"`
			Version uint64                `json:"version"`
		} `json:"package"`
	}
	_ = json.Unmarshal(c.Payload, &p)
	if c.Type == protocol.CmdContextPublish {
		return fmt.Sprintf("%s %s v%d", c.Type, p.Package.Scope.WorkItemID, p.Package.Version)
	}
	return fmt.Sprintf("%s %s%s", c.Type, p.WorkItemID, p.Principal.ID)
}

// A coordinator stopped after its k-th command and replaced by a new one
// on the same log (same agent, fresh memory) neither repeats nor loses a
// step: every command acts once on its target, no action id is reused
// with other bytes (the authority would refuse it), and the Mission ends
// approved.
func TestRestartMidMissionRepeatsNothing(t *testing.T) {
	p := mustPlan(t, "../examples/plans/bugfix.yaml")
	for _, k := range []int{1, 4, 7, 11, 14} {
		t.Run(fmt.Sprintf("stop-after-%d", k), func(t *testing.T) {
			r := newRig(t, p)
			ctx, cancel := context.WithCancel(r.ctx)
			defer cancel()
			caps := capsOf(p)
			workers := []*fakeWorker{r.worker("w1", caps, nil), r.worker("w2", caps, nil)}
			cfg := r.coordinator("c1", "w1", "w2")
			rec := &recorder{Authority: cfg.Authority, stopAfter: k}
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
			case err := <-errc:
				if err == nil {
					t.Fatalf("the first coordinator finished before its %d-th command", k)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("the first coordinator never sent %d commands (%d refused: %v)\n%s", k, len(rec.refused), rec.refused, r.dump())
			}

			second, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			go func() { errc <- second.Run(ctx) }()
			r.waitMission(protocol.MissionApproved, errc)
			if err := <-errc; err != nil {
				t.Fatalf("second Run: %v", err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			seen := map[string]string{}
			for _, c := range rec.accepted {
				tg := target(c)
				if c.Type == protocol.CmdWorkOffer {
					continue // an offer is one per item here too, checked below
				}
				if id, dup := seen[tg]; dup {
					t.Errorf("%s sent twice: %s and %s", tg, id, c.ActionID)
				}
				seen[tg] = c.ActionID
			}
			offers := map[string]int{}
			for _, c := range rec.accepted {
				if c.Type == protocol.CmdWorkOffer {
					offers[target(c)]++
				}
			}
			for tg, n := range offers {
				if n != 1 {
					t.Errorf("%s sent %d times", tg, n)
				}
			}
			for _, err := range rec.refused {
				if protocol.CodeOf(err) == protocol.CodeActionIDCollision {
					t.Errorf("an action id was reused with other bytes: %v", err)
				}
			}
			if len(seen)+len(offers) < len(p.Stages)*3+2 {
				t.Errorf("only %d distinct commands: %v", len(seen), seen)
			}
		})
	}
}
