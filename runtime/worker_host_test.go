package runtime

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// manifestHandler publishes the artifacts it is given and submits them.
type manifestHandler struct{ arts []slots.Artifact }

func (h *manifestHandler) Capability() protocol.Capability {
	return protocol.Capability{ID: "code.implement", Version: "1.2.0"}
}

func (h *manifestHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	var ds []string
	for _, a := range h.arts {
		d, err := w.Publish(ctx, a)
		if err != nil {
			return slots.Result{}, err
		}
		ds = append(ds, d)
	}
	ev := protocol.Evidence{Subject: w.Slot().WorkItemID, Criteria: protocol.List[string]{"ac-1", "ac-2"}, Method: "deterministic-test", Result: protocol.EvidencePass,
		Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, Timestamp: protocol.NewTime(t0), Artifacts: ds}
	return slots.Result{Artifacts: ds, Evidence: []protocol.Evidence{ev}}, nil
}

// The manifests a running worker signs carry what the handler said about
// its output and what the worker knows (spec 13.1): the capability
// version that ran, the handler's tools, the schema (the media type's
// default when neither handler nor contract names one), and a classification
// never below the worker's floor.
func TestWorkerManifestFields(t *testing.T) {
	k := newWKit(t)
	h := &manifestHandler{arts: []slots.Artifact{
		{MediaType: "text/x-diff", Data: []byte("--- a/x\n")},
		{MediaType: "application/json", Schema: "https://schemas.example/report.json", Data: []byte(`{"passed":3}`),
			Classification: protocol.ClassRestricted, ToolVersions: map[string]string{"pytest": "8.3.2", "code.implement": "9.9.9"}},
		{MediaType: "text/plain", Data: []byte("notes"), Classification: protocol.ClassPublic},
	}}
	cfg := k.workerConfig("w1", t.TempDir(), h, 1)
	cfg.Classification = protocol.ClassConfidential
	tw := k.start(cfg)
	k.member("w1")
	tw.w.AddGroup("grp-a")
	// The contract names a schema for the notes, which the handler does not.
	c := contractFor("wi-1", protocol.UrgencyNormal, k.ac.Now())
	c.RequiredOutputs = append(c.RequiredOutputs, protocol.OutputSpec{Name: "notes", MediaType: "text/plain", Schema: "https://schemas.example/notes.json"})
	k.ok(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: "wi-1", MissionID: "mis-a", Contract: c})
	k.reoffer("wi-1", "off-wi-1", "w1")
	k.until("submitted", func() bool { return k.state("wi-1") == protocol.WorkSubmitted }, tw)

	got := map[string]protocol.ArtifactManifest{}
	for _, ev := range k.events() {
		if ev.Type != protocol.EvtArtifactPublished {
			continue
		}
		var p group.ArtifactPublished
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		got[p.Manifest.MediaType] = p.Manifest
	}
	for _, tc := range []struct {
		media, schema string
		class         protocol.Classification
		tools         map[string]string
	}{
		// Neither the handler nor the contract names a schema: the media
		// type's default.
		{"text/x-diff", protocol.MediaTypeSchemaBase + "text/x-diff", protocol.ClassConfidential, map[string]string{"code.implement": "1.2.0"}},
		{"application/json", "https://schemas.example/report.json", protocol.ClassRestricted, map[string]string{"code.implement": "1.2.0", "pytest": "8.3.2"}},
		// The handler names none, the contract's required output does.
		{"text/plain", "https://schemas.example/notes.json", protocol.ClassConfidential, map[string]string{"code.implement": "1.2.0"}},
	} {
		m, ok := got[tc.media]
		if !ok {
			t.Fatalf("no manifest for %s among %d", tc.media, len(got))
		}
		if m.Schema != tc.schema || m.Classification != tc.class || !maps.Equal(m.ToolVersions, tc.tools) {
			t.Errorf("%s: schema %q classification %s tools %v, want %q %s %v", tc.media, m.Schema, m.Classification, m.ToolVersions, tc.schema, tc.class, tc.tools)
		}
	}
}

func TestOutputSchema(t *testing.T) {
	c := protocol.WorkContract{RequiredOutputs: protocol.List[protocol.OutputSpec]{
		{Name: "patch", MediaType: "text/x-diff"},
		{Name: "report", MediaType: "application/json", Schema: "s:report"},
		{Name: "a", MediaType: "application/yaml", Schema: "s:a"},
		{Name: "b", MediaType: "application/yaml", Schema: "s:b"},
	}}
	for _, tc := range []struct {
		a    slots.Artifact
		want string
	}{
		{slots.Artifact{MediaType: "application/json"}, "s:report"},
		{slots.Artifact{MediaType: "application/json", Schema: "s:own"}, "s:own"},
		{slots.Artifact{MediaType: "text/x-diff"}, ""},
		{slots.Artifact{MediaType: "application/yaml"}, ""}, // two outputs disagree: name none
		{slots.Artifact{MediaType: "text/plain"}, ""},
	} {
		if got := outputSchema(tc.a, c); got != tc.want {
			t.Errorf("%s/%q: %q, want %q", tc.a.MediaType, tc.a.Schema, got, tc.want)
		}
	}
}

func TestMoreRestricted(t *testing.T) {
	for _, tc := range []struct{ handler, floor, want protocol.Classification }{
		{"", "", protocol.ClassInternal},
		{protocol.ClassPublic, "", protocol.ClassInternal},
		{protocol.ClassPublic, protocol.ClassPublic, protocol.ClassPublic},
		{protocol.ClassConfidential, protocol.ClassInternal, protocol.ClassConfidential},
		{protocol.ClassInternal, protocol.ClassRestricted, protocol.ClassRestricted},
	} {
		if got := moreRestricted(tc.handler, tc.floor); got != tc.want {
			t.Errorf("moreRestricted(%q, %q) = %q, want %q", tc.handler, tc.floor, got, tc.want)
		}
	}
}

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
