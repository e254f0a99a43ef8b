package runtime

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// stepHandler runs a WorkItem in steps, each with a checkpoint (a safe
// point). A step waits until the test releases the item; a preemption
// request is honoured at the next safe point, also while waiting.
type stepHandler struct {
	steps int
	mu    sync.Mutex
	gates map[string]chan struct{}
	ticks map[string]chan struct{} // one step per token
	runs  map[string][]string      // per item: "fresh" or "resumed:N" for each run
	done  map[string]int           // per item: the last step checkpointed
	// criteria the submitted evidence covers; nil: ac-1 and ac-2, all of
	// contractFor's.
	criteria []string
}

func newStepHandler(steps int) *stepHandler {
	return &stepHandler{steps: steps, gates: map[string]chan struct{}{}, ticks: map[string]chan struct{}{}, runs: map[string][]string{}, done: map[string]int{}}
}

func (h *stepHandler) Capability() protocol.Capability {
	return protocol.Capability{ID: "code.implement", Version: "1.2.0"}
}

func (h *stepHandler) gate(id string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.gates[id]
	if g == nil {
		g = make(chan struct{})
		h.gates[id] = g
	}
	return g
}

func (h *stepHandler) tick(id string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.ticks[id]
	if c == nil {
		c = make(chan struct{}, 16)
		h.ticks[id] = c
	}
	return c
}

// advance lets an item take one step.
func (h *stepHandler) advance(id string) { h.tick(id) <- struct{}{} }

// release lets an item run to its end.
func (h *stepHandler) release(id string) { close(h.gate(id)) }

func (h *stepHandler) stepped(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done[id]
}

func (h *stepHandler) history(id string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.runs[id]...)
}

func (h *stepHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	id := w.Slot().WorkItemID
	n := 0
	how := "fresh"
	if st, ok := w.Resume(); ok {
		n, _ = strconv.Atoi(string(st))
		how = "resumed:" + string(st)
	}
	h.mu.Lock()
	h.runs[id] = append(h.runs[id], how)
	h.mu.Unlock()
	if _, err := w.Checkpoint(ctx, []byte(strconv.Itoa(n)), checkpoint.Meta{Phase: "step " + strconv.Itoa(n)}); err != nil {
		return slots.Result{}, err
	}
	for n < h.steps {
		select {
		case <-w.PreemptRequested():
			return slots.Result{}, slots.ErrPreempted
		case <-ctx.Done():
			return slots.Result{}, ctx.Err()
		case <-h.gate(id):
		case <-h.tick(id):
		}
		n++
		phase := "step " + strconv.Itoa(n)
		if err := w.Progress(ctx, protocol.Progress{Phase: phase, MilestonesCompleted: protocol.List[string]{phase}, NextCheckpoint: "step " + strconv.Itoa(n+1),
			Blockers: protocol.List[string]{}, EvidenceRefs: protocol.List[string]{},
			RevisedEstimate: protocol.RevisedEstimate{CompletionAt: protocol.NewTime(t0.Add(time.Hour)), Confidence: 0.8}}); err != nil {
			return slots.Result{}, err
		}
		if _, err := w.Checkpoint(ctx, []byte(strconv.Itoa(n)), checkpoint.Meta{Phase: phase}); err != nil {
			return slots.Result{}, err
		}
		h.mu.Lock()
		h.done[id] = n
		h.mu.Unlock()
	}
	d, err := w.PublishArtifact(ctx, "text/x-diff", []byte("--- a/"+id+"\n+++ b/"+id+"\n"))
	if err != nil {
		return slots.Result{}, err
	}
	criteria := protocol.List[string]{"ac-1", "ac-2"}
	if h.criteria != nil {
		criteria = h.criteria
	}
	ev := protocol.Evidence{Subject: id, Criteria: criteria, Method: "deterministic-test", Result: protocol.EvidencePass,
		Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, Timestamp: protocol.NewTime(t0), Artifacts: protocol.List[string]{d}}
	return slots.Result{Artifacts: []string{d}, Evidence: []protocol.Evidence{ev}}, nil
}
