package authoritylite

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

const gpuURI = "urn:example:ext:gpu"

// gpuSchema is the example profile's data schema.
var gpuSchema = []byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","additionalProperties":false,
"required":["model"],"properties":{"model":{"type":"string"},"count":{"type":"integer","minimum":1}}}`)

// signedProfile returns the profile document for gpuSchema at version,
// signed by key, with edit applied before signing.
func signedProfile(t *testing.T, key protocol.PrivateKey, version string, edit func(*protocol.ExtensionProfile)) []byte {
	t.Helper()
	parsed, err := protocol.Parse(gpuSchema, protocol.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	canon, err := protocol.Canonical(parsed)
	if err != nil {
		t.Fatal(err)
	}
	p := protocol.ExtensionProfile{URI: gpuURI, Version: version, SchemaURI: "https://schemas.example/gpu.schema.json", SchemaHash: protocol.Digest(canon),
		RequiredCapabilities: protocol.List[protocol.Capability]{{ID: "gpu.run", Version: "1.x"}}, Critical: true, OrganizationID: "org-1",
		ApprovedAt: protocol.NewTime(t0)}
	if edit != nil {
		edit(&p)
	}
	raw, err := protocol.SignedProfile(p, key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Extension profiles (spec 18): registered only when the Organization's
// policy service signed them and the schema hash holds; pinned by a Group
// at mission.create at the registered major; data under a pinned profile
// validated by its schema; a critical extension the Group does not pin is
// unknown to it; nothing refused reaches the log.
func TestExtensionProfiles(t *testing.T) {
	k := newSvc(t)
	pk := mustKey(t, protocol.ActorService, "org-policy")
	if err := k.s.AddPrincipal(protocol.ActorService, "org-policy", pk.Public()); err != nil {
		t.Fatal(err)
	}
	stranger := mustKey(t, protocol.ActorService, "someone")
	for name, tc := range map[string]struct {
		doc  []byte
		want string
	}{
		"signed by no policy service": {signedProfile(t, stranger, "1.2.0", nil), "not by a registered Organization policy service"},
		"schema hash of other bytes":  {signedProfile(t, pk, "1.2.0", func(p *protocol.ExtensionProfile) { p.SchemaHash = protocol.Digest([]byte("x")) }), "schemaHash"},
		"version not semantic":        {signedProfile(t, pk, "one", nil), "version"},
		"tampered after signing":      {[]byte(strings.Replace(string(signedProfile(t, pk, "1.2.0", nil)), `"critical":true`, `"critical":false`, 1)), "signature"},
	} {
		if err := k.s.RegisterProfile(tc.doc, gpuSchema); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal naming %q", name, err, tc.want)
		}
	}
	if err := k.s.RegisterProfile(signedProfile(t, pk, "1.2.0", nil), gpuSchema); err != nil {
		t.Fatal(err)
	}

	create := func(group string, pins ...protocol.ProfilePin) error {
		_, err := k.alice.Do(context.Background(), protocol.CmdMissionCreate, group, &protocol.CreateMissionPayload{MissionID: "mis-" + group, Title: "t", Objective: "o",
			PriorityClass: protocol.PriorityNormal, ExtensionProfiles: pins})
		return err
	}
	if err := create("grp-x", protocol.ProfilePin{URI: "urn:example:ext:none", Major: 1}); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
		t.Fatalf("pin of an unregistered profile: %v", err)
	}
	if err := create("grp-x", protocol.ProfilePin{URI: gpuURI, Major: 2}); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
		t.Fatalf("pin of another major: %v", err)
	}
	if err := create("grp-p", protocol.ProfilePin{URI: gpuURI, Major: 1}); err != nil {
		t.Fatal(err)
	}
	if gs := k.s.group("grp-p"); len(gs.g.Profiles) != 1 || gs.g.Profiles[0].URI != gpuURI {
		t.Fatalf("Group pins %+v", gs.g.Profiles)
	}

	post := func(group, id string, critical bool, data string) error {
		_, err := k.alice.Do(context.Background(), protocol.CmdMessagePost, group, &protocol.PostMessagePayload{MessageID: id, ConversationID: "c", Text: "x"},
			func(e *protocol.Envelope) {
				e.Extensions = protocol.Extensions{gpuURI: {Critical: critical, Data: json.RawMessage(data)}}
			})
		return err
	}
	before := storedEvents(t, k.s)
	for _, tc := range []struct {
		name, group string
		critical    bool
		data        string
		code        protocol.Code
		pointer     string
	}{
		{"data outside the profile's schema", "grp-p", true, `{"model":"L4","count":0}`, protocol.CodeSchemaValidationFailed, "/extensions/" + gpuURI + "/data/count"},
		{"critical in a Group that does not pin it", "grp-a", true, `{"model":"L4"}`, protocol.CodeUnknownCriticalExtension, "/extensions/" + gpuURI},
	} {
		err := post(tc.group, "m-bad", tc.critical, tc.data)
		if protocol.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.pointer) {
			t.Errorf("%s: %v, want %s at %s", tc.name, err, tc.code, tc.pointer)
		}
	}
	if storedEvents(t, k.s) != before {
		t.Fatal("a refused command changed the log")
	}
	// Conforming data in the pinning Group: accepted and relayed, critical.
	if err := post("grp-p", "m-1", true, `{"model":"L4","count":2}`); err != nil {
		t.Fatal(err)
	}
	evs := checkLog(t, k.s, "grp-p")
	if e := evs[len(evs)-1].Extensions[gpuURI]; !e.Critical || string(e.Data) != `{"count":2,"model":"L4"}` {
		t.Fatalf("relayed %+v", evs[len(evs)-1].Extensions)
	}
	// Non-critical in a Group that does not pin it: relayed uninterpreted.
	if err := post("grp-a", "m-2", false, `{"anything":true}`); err != nil {
		t.Fatal(err)
	}
	// No Organization command depends on a Group's pins.
	a := k.s.org.agent("w1")
	_, err := k.w["w1"].Do(context.Background(), protocol.CmdSessionOpen, "", &protocol.OpenSessionPayload{AgentID: "w1", SessionEpoch: a.SessionEpoch + 1, AgentCardHash: a.CardHash},
		func(e *protocol.Envelope) {
			e.Extensions = protocol.Extensions{gpuURI: {Critical: true, Data: json.RawMessage(`{"model":"L4"}`)}}
		})
	if protocol.CodeOf(err) != protocol.CodeUnknownCriticalExtension {
		t.Fatalf("critical profile extension on an Organization command: %v", err)
	}
}
