package coordinator

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// collider answers the first `refuse` commands of type typ with
// ACTION_ID_COLLISION, as the authority does when the actionId is taken by
// other content, and passes the rest through. It keeps every command sent,
// in order, and what became of it.
type collider struct {
	Authority
	typ    protocol.CommandType
	refuse int

	mu      sync.Mutex
	sent    []protocol.Command
	refused []bool
}

func (a *collider) Submit(ctx context.Context, raw []byte) (*protocol.Receipt, error) {
	var cmd protocol.Command
	if err := json.Unmarshal(raw, &cmd); err != nil {
		return nil, err
	}
	a.mu.Lock()
	refuse := cmd.Type == a.typ && a.refuse > 0
	if refuse {
		a.refuse--
	}
	a.sent, a.refused = append(a.sent, cmd), append(a.refused, refuse)
	a.mu.Unlock()
	if refuse {
		return nil, protocol.Errorf(protocol.CodeActionIDCollision, "injected: actionId %s was used with other content", cmd.ActionID)
	}
	return a.Authority.Submit(ctx, raw)
}

// A command refused with ACTION_ID_COLLISION is built again at once with a
// new actionId (spec 19), not left waiting for the log to move: the next
// command the coordinator sends is the same offer of the same item under
// another id, and that is the one the authority records. Refused again and
// again, the offer takes a new id each time up to maxRebuilds, then waits
// like any refused action.
func TestCoordinatorRebuildsAfterActionIDCollision(t *testing.T) {
	p := mustPlan(t, "../examples/plans/bugfix.yaml")
	first := p.Mission.ID + ":" + p.Stages[0].ID
	for _, refuse := range []int{1, 3} {
		t.Run(map[int]string{1: "once", 3: "three times"}[refuse], func(t *testing.T) {
			r := newRig(t, p)
			ctx, cancel := context.WithCancel(r.ctx)
			defer cancel()
			cfg := r.coordinator("c1", "w1")
			r.join("w1", capsOf(p), protocol.RoleWorker)
			col := &collider{Authority: cfg.Authority, typ: protocol.CmdWorkOffer, refuse: refuse}
			cfg.Authority = col
			// An offer left waiting as a refused action shows as this
			// warning: the test ends on it at once instead of waiting out
			// a deadline.
			blocked := make(chan struct{}, 1)
			cfg.Logger = slog.New(&onMessage{Handler: cfg.Logger.Handler(), msg: "coordinator action refused", c: blocked})
			_, errc := r.launch(ctx, cfg)
			// The offer's event, once committed: the WorkItem's state is
			// decided before its commit, and the log is what is read below.
			created := func() (causes []string) {
				evs, err := r.svc.Events(p.Mission.GroupID, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, se := range evs {
					var ev protocol.Event
					if err := json.Unmarshal(se.Raw, &ev); err != nil {
						t.Fatal(err)
					}
					if ev.Type == protocol.EvtWorkOfferCreated {
						causes = append(causes, ev.CausationID)
					}
				}
				return causes
			}
			for {
				last := r.svc.LastSequence(p.Mission.GroupID)
				if len(created()) > 0 {
					break
				}
				select {
				case <-r.svc.Changed(p.Mission.GroupID, last):
				case <-blocked:
					t.Fatalf("the refused offer waits for the log to move instead of being built again\n%s", r.dump())
				case err := <-errc:
					t.Fatalf("the coordinator ended: %v", err)
				case <-time.After(60 * time.Second):
					t.Fatalf("%s never offered\n%s", first, r.dump())
				}
			}

			col.mu.Lock()
			sent, refused := append([]protocol.Command(nil), col.sent...), append([]bool(nil), col.refused...)
			col.mu.Unlock()
			at := -1
			for i, c := range sent {
				if c.Type == protocol.CmdWorkOffer {
					at = i
					break
				}
			}
			if at < 0 || len(sent) < at+refuse+1 {
				t.Fatalf("%d commands sent, the first offer at %d", len(sent), at)
			}
			ids := map[string]bool{}
			for i := at; i <= at+refuse; i++ {
				c := sent[i]
				if c.Type != protocol.CmdWorkOffer || target(c) != target(sent[at]) {
					t.Fatalf("command %d after the refused offer is %s, want the same offer built again", i-at, target(c))
				}
				if refused[i] != (i < at+refuse) {
					t.Fatalf("command %d: refused %v", i-at, refused[i])
				}
				if ids[c.ActionID] {
					t.Fatalf("offer rebuilt under the used actionId %s", c.ActionID)
				}
				ids[c.ActionID] = true
			}
			accepted := sent[at+refuse].ActionID
			if !slices.Contains(created(), accepted) {
				t.Fatalf("no work.offered caused by the rebuilt offer %s\n%s", accepted, r.dump())
			}
		})
	}
}

// onMessage passes records on and signals c once for each one whose
// message is msg.
type onMessage struct {
	slog.Handler
	msg string
	c   chan struct{}
}

func (h *onMessage) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.c <- struct{}{}:
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *onMessage) WithAttrs(as []slog.Attr) slog.Handler {
	return &onMessage{Handler: h.Handler.WithAttrs(as), msg: h.msg, c: h.c}
}

func (h *onMessage) WithGroup(name string) slog.Handler {
	return &onMessage{Handler: h.Handler.WithGroup(name), msg: h.msg, c: h.c}
}
