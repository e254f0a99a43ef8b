package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// slowClarifier is asked off the loop (slots.OfferClarifier) and answers
// about a contract revision only once the test opens that revision's gate:
// the worker must hold its decision on the offer meanwhile. (A corrected
// offer may be asked about twice: its revision can reach the worker before
// the new offer does.)
type slowClarifier struct {
	*stepHandler
	mu    sync.Mutex
	asked []slots.ClarifyRequest
	gates map[uint64]chan struct{}
	err   error
}

func newSlowClarifier(err error) *slowClarifier {
	return &slowClarifier{stepHandler: newStepHandler(1), gates: map[uint64]chan struct{}{}, err: err}
}

func (h *slowClarifier) gate(rev uint64) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gates[rev] == nil {
		h.gates[rev] = make(chan struct{})
	}
	return h.gates[rev]
}

func (h *slowClarifier) ClarifyOffer(ctx context.Context, q slots.ClarifyRequest) ([]string, error) {
	h.mu.Lock()
	h.asked = append(h.asked, q)
	h.mu.Unlock()
	select {
	case <-h.gate(q.Contract.Revision):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if h.err != nil {
		return nil, h.err
	}
	if strings.Contains(q.Contract.Goal, "branch") {
		return []string{}, nil
	}
	return []string{"which branch should the change go to?"}, nil
}

func (h *slowClarifier) askedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.asked)
}

func noticeWith(k *wkit, marker string) string {
	for _, ev := range k.events() {
		if ev.Type == protocol.EvtMessagePosted && strings.Contains(string(ev.Payload), marker) {
			return string(ev.Payload)
		}
	}
	return ""
}

// A handler that must be asked off the loop (an external program) holds
// the offer undecided until it answers: not accepted meanwhile, its
// questions raised like a Clarifier's, the corrected offer asked about
// again and accepted (spec 10.1).
func TestWorkerAsksSlowClarifierBeforeAccepting(t *testing.T) {
	k := newWKit(t)
	h := newSlowClarifier(nil)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	t.Cleanup(func() {
		if t.Failed() {
			h.mu.Lock()
			for _, q := range h.asked {
				t.Logf("asked %s rev %d", q.OfferID, q.Contract.Revision)
			}
			h.mu.Unlock()
		}
	})
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.until("the handler asked", func() bool { return h.askedCount() == 1 }, tw)
	k.caughtUp(tw)
	if st := k.state("wi-1"); st != protocol.WorkOffered {
		t.Fatalf("wi-1 %s while its handler had not answered", st)
	}
	if q := h.asked[0]; q.OfferID != "off-wi-1" || q.WorkItemID != "wi-1" || q.GroupID != "grp-a" || q.MissionID != "mis-a" || q.Contract.Goal == "" {
		t.Fatalf("asked %+v", q)
	}
	rev := h.asked[0].Contract.Revision
	close(h.gate(rev))
	k.until("ambiguity posted", func() bool { return noticeWith(k, "contract.ambiguity") != "" }, tw)
	if n := noticeWith(k, "contract.ambiguity"); !strings.Contains(n, "which branch should the change go to?") {
		t.Fatalf("notice %s", n)
	}
	k.caughtUp(tw)
	if st := k.state("wi-1"); st != protocol.WorkOffered || h.askedCount() != 1 {
		t.Fatalf("wi-1 %s after the questions, asked %d times", st, h.askedCount())
	}

	// The corrected contract in a new offer is asked about again.
	c := k.item("wi-1").Contract
	c.Goal += " on branch main"
	c.Revision++
	p := k.offerPayload("wi-1", "off-wi-1-2", k.ac.Now().Add(time.Hour), "w1")
	p.Contract = c
	k.ok(k.coord, protocol.CmdWorkOffer, p)
	k.until("asked about the new offer", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.ContainsFunc(h.asked, func(q slots.ClarifyRequest) bool { return q.OfferID == "off-wi-1-2" })
	}, tw)
	close(h.gate(c.Revision))
	k.waitFor("wi-1 running on the corrected contract", runningAll("wi-1"), tw)
}

// A handler that cannot be asked (its program failed) refuses the offer
// for capability, with a notice that keeps the program's output out of
// the Group.
func TestWorkerRefusesOfferWhenClarifyFails(t *testing.T) {
	k := newWKit(t)
	h := newSlowClarifier(errors.New("slots: clarify: secret stderr"))
	close(h.gate(1))
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	k.member("w1")
	tw.w.AddGroup("grp-a")
	k.offer("wi-1", protocol.UrgencyNormal, "w1")
	k.until("refusal posted", func() bool { return noticeWith(k, "admission.rejection") != "" }, tw)
	n := noticeWith(k, "admission.rejection")
	if !strings.Contains(n, `\"reason\":\"capability\"`) || strings.Contains(n, "secret") {
		t.Fatalf("notice %s", n)
	}
	k.caughtUp(tw)
	if st := k.state("wi-1"); st != protocol.WorkOffered {
		t.Fatalf("wi-1 %s", st)
	}
}

const gpuURI = "urn:example:ext:gpu"

// registerGPU registers a critical extension profile with the authority
// and returns the pin of it.
func registerGPU(t *testing.T) func(*authoritylite.Service) []protocol.ProfilePin {
	return func(s *authoritylite.Service) []protocol.ProfilePin {
		pk := testKey(t, protocol.ActorService, "org-policy")
		if err := s.AddPrincipal(protocol.ActorService, "org-policy", pk.Public()); err != nil {
			t.Fatal(err)
		}
		schema := []byte(`{"type":"object","required":["model"]}`)
		hash, err := protocol.SchemaHash(schema)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := protocol.SignedProfile(protocol.ExtensionProfile{URI: gpuURI, Version: "1.0.0", SchemaURI: "https://schemas.example/gpu.schema.json",
			SchemaHash: hash, RequiredCapabilities: protocol.List[protocol.Capability]{}, Critical: true, OrganizationID: "org-1", ApprovedAt: protocol.NewTime(t0)}, pk)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterProfile(doc, schema); err != nil {
			t.Fatal(err)
		}
		return []protocol.ProfilePin{{URI: gpuURI, Major: 1}}
	}
}

// offerWithGPU offers item id to w1 with the critical gpu extension.
func (k *wkit) offerWithGPU(id string) {
	k.t.Helper()
	now := k.ac.Now()
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: contractFor(id, protocol.UrgencyNormal, now)})
	w, _ := k.auth.Service.WorkItem("grp-a", id)
	basis := protocol.SelectionBasis{CapabilityMatches: protocol.List[protocol.CapabilityMatch]{{ID: "code.implement", Required: "1.x", Offered: "1.2.0"}},
		AuthorizationEligible: true, AvailabilityEstimate: protocol.AvailabilityEstimate{EarliestStart: protocol.NewTime(now), Confidence: 0.9},
		ExpectedCost: protocol.Budgets{Tokens: protocol.Uint64(100)}, ReliabilityEvidence: protocol.List[protocol.ReliabilityRecord]{}, PolicyRulesApplied: protocol.List[string]{"x"}}
	_, err := k.coord.Do(context.Background(), protocol.CmdWorkOffer, "grp-a", &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-" + id, Contract: w.Contract,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: basis}}, ExpiresAt: protocol.NewTime(now.Add(time.Hour))},
		func(e *protocol.Envelope) {
			e.Extensions = protocol.Extensions{gpuURI: {Critical: true, Data: json.RawMessage(`{"model":"L4"}`)}}
		})
	if err != nil {
		k.t.Fatal(err)
	}
}

// A worker does not take part in a transition that depends on a critical
// extension it does not interpret (spec 18): the offer that carries one is
// refused, naming it; a worker configured with the profile accepts it.
func TestWorkerRefusesOfferOfUnknownCriticalExtension(t *testing.T) {
	for _, knows := range []bool{false, true} {
		k := newWKitPinned(t, 2*time.Minute, nil, registerGPU(t))
		h := &extHandler{got: make(chan protocol.Extensions, 1)}
		cfg := k.workerConfig("w1", t.TempDir(), h, 1)
		if knows {
			cfg.Extensions = []string{gpuURI}
		}
		tw := k.start(cfg)
		k.member("w1")
		tw.w.AddGroup("grp-a")
		k.offerWithGPU("wi-1")
		st := k.waitFor("admission decided", func(s WorkerStatus) bool { return len(s.Admissions) > 0 }, tw)
		a := st.Admissions[0]
		if knows {
			if !a.Accepted {
				t.Fatalf("a worker that interprets the profile refused: %+v", a.Rejection)
			}
			// The handler gets the offer's extension data.
			select {
			case got := <-h.got:
				if e := got[gpuURI]; !e.Critical || string(e.Data) != `{"model":"L4"}` {
					t.Fatalf("the handler got extensions %+v", got)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the handler never ran")
			}
		} else {
			if a.Accepted || a.Rejection.Reason != protocol.RejectCapability || !strings.Contains(a.Rejection.Detail, gpuURI) {
				t.Fatalf("admission %+v, want a capability refusal naming %s", a, gpuURI)
			}
			if s := k.state("wi-1"); s != protocol.WorkOffered {
				t.Fatalf("wi-1 is %s, want it left offered", s)
			}
		}
		if err := tw.stop(t); err != nil {
			t.Fatal(err)
		}
	}
}

// extHandler hands the run's extensions to the test and completes.
type extHandler struct{ got chan protocol.Extensions }

func (h *extHandler) Capability() protocol.Capability {
	return protocol.Capability{ID: "code.implement", Version: "1.2.0"}
}

func (h *extHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	h.got <- w.Extensions()
	if _, err := w.Checkpoint(ctx, []byte("0"), checkpoint.Meta{Phase: "start"}); err != nil {
		return slots.Result{}, err
	}
	select { // until the test stops the worker
	case <-w.PreemptRequested():
		return slots.Result{}, slots.ErrPreempted
	case <-ctx.Done():
		return slots.Result{}, ctx.Err()
	}
}
