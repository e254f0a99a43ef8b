package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

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
