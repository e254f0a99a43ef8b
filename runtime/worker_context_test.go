package runtime

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// contextHandler records, per WorkItem, the Context Package its run got
// and the events it read through CitedEvents.
type contextHandler struct {
	*stepHandler
	mu   sync.Mutex
	got  map[string][]byte
	read map[string][]protocol.Event
	errs map[string]error
}

func (h *contextHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	id := w.Slot().WorkItemID
	var evs []protocol.Event
	var err error
	if w.Context() != nil {
		for from := uint64(0); ; {
			var page []json.RawMessage
			if page, err = w.CitedEvents(ctx, from, 2); err != nil || len(page) == 0 {
				break
			}
			for _, raw := range page {
				var ev protocol.Event
				if err = json.Unmarshal(raw, &ev); err != nil {
					break
				}
				evs = append(evs, ev)
				from = ev.Seq() + 1
			}
		}
	}
	h.mu.Lock()
	h.got[id], h.read[id], h.errs[id] = w.Context(), evs, err
	h.mu.Unlock()
	return h.stepHandler.Run(ctx, w)
}

// TestWorkerContextPackage: a run gets its own WorkItem's package, as the
// coordinator published it, and reads the events it cites from the
// worker's store; an item without a package gets none (not another
// item's).
func TestWorkerContextPackage(t *testing.T) {
	k := newWKit(t)
	h := &contextHandler{stepHandler: newStepHandler(0), got: map[string][]byte{}, read: map[string][]protocol.Event{}, errs: map[string]error{}}
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 2))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	now := k.ac.Now()
	for _, id := range []string{"wi-1", "wi-2"} {
		k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: contractFor(id, protocol.UrgencyNormal, now)})
	}
	last := k.auth.Service.LastSequence("grp-a")
	pkg, err := protocol.SignContextPackage(protocol.ContextPackage{PackageID: "ctx-wi-1", Version: 1,
		Scope:        protocol.ContextScope{MissionID: "mis-a", GroupID: "grp-a", WorkItemID: "wi-1"},
		SourceEvents: protocol.EventRange{GroupID: "grp-a", FromSequence: 2, ToSequence: last},
		Artifacts:    protocol.List[string]{}, Decisions: protocol.List[protocol.Decision]{},
		Constraints: protocol.List[string]{"keep the public API"}, OpenQuestions: protocol.List[string]{"which Go version?"},
		Generator: protocol.Generator{AgentID: "coord", AgentVersion: "1.0.0"}, GeneratedAt: protocol.NewTime(now)}, k.coord.Key)
	if err != nil {
		t.Fatal(err)
	}
	k.ok(k.coord, protocol.CmdContextPublish, &protocol.PublishContextPayload{Package: pkg})
	k.reoffer("wi-1", "off-wi-1", "w1")
	k.reoffer("wi-2", "off-wi-2", "w1")
	k.until("both submitted", func() bool {
		return k.state("wi-1") == protocol.WorkSubmitted && k.state("wi-2") == protocol.WorkSubmitted
	}, tw)

	h.mu.Lock()
	defer h.mu.Unlock()
	var got protocol.ContextPackage
	if err := json.Unmarshal(h.got["wi-1"], &got); err != nil {
		t.Fatalf("wi-1's context %q: %v", h.got["wi-1"], err)
	}
	if got.PackageID != "ctx-wi-1" || got.Scope.WorkItemID != "wi-1" || got.OpenQuestions[0] != "which Go version?" || got.Signature.Value != pkg.Signature.Value {
		t.Fatalf("wi-1 got %+v", got)
	}
	if err := protocol.VerifyContextPackage(got, protocol.NewKeySet(k.coord.Key.Public())); err != nil {
		t.Fatalf("the package reached the handler changed: %v", err)
	}
	if h.errs["wi-1"] != nil || uint64(len(h.read["wi-1"])) != last-1 {
		t.Fatalf("wi-1 read %d cited events (%v), want %d", len(h.read["wi-1"]), h.errs["wi-1"], last-1)
	}
	for i, ev := range h.read["wi-1"] {
		if ev.GroupID != "grp-a" || ev.Seq() != uint64(i)+2 {
			t.Fatalf("cited event %d is %s/%d", i, ev.GroupID, ev.Seq())
		}
	}
	if h.got["wi-2"] != nil {
		t.Fatalf("wi-2 got a context it has none of: %s", h.got["wi-2"])
	}
}
