package authoritylite

import (
	"encoding/json"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// TestPublishHoldsProducerAndSources: a manifest names its producer's
// registered card and version, and provenance the Group can account for.
func TestPublishHoldsProducerAndSources(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	known := k.publish("w1", w, []byte("published first"))
	card, _ := k.s.AgentCard("w1")
	a := k.s.org.agent("w1")
	tests := []struct {
		name string
		edit func(*protocol.ArtifactManifest)
		code protocol.Code
	}{
		{"as registered", func(*protocol.ArtifactManifest) {}, ""},
		{"a source published in the Group", func(m *protocol.ArtifactManifest) { m.SourceArtifacts = protocol.List[string]{known} }, ""},
		{"another card hash", func(m *protocol.ArtifactManifest) { m.Producer.AgentCardHash = protocol.Digest([]byte("other card")) }, protocol.CodeInvalidCommand},
		{"another agent version", func(m *protocol.ArtifactManifest) { m.Producer.AgentVersion = card.AgentVersion + "-x" }, protocol.CodeInvalidCommand},
		{"an unknown source", func(m *protocol.ArtifactManifest) {
			m.SourceArtifacts = protocol.List[string]{known, protocol.Digest([]byte("never published"))}
		}, protocol.CodeInvalidCommand},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte("output " + tc.name)
			digest, err := k.s.PutArtifact(data)
			if err != nil {
				t.Fatal(err)
			}
			m := protocol.ArtifactManifest{ContentHash: digest, MediaType: "text/plain",
				Producer:  protocol.ArtifactProducer{AgentID: "w1", AgentVersion: card.AgentVersion, AgentCardHash: a.CardHash},
				MissionID: "mis-a", GroupID: "grp-a", WorkItemID: w.WorkItemID, SourceArtifacts: protocol.List[string]{}, ToolVersions: protocol.StringMap{},
				CreatedAt: protocol.NewTime(k.clk.Now()), Classification: protocol.ClassInternal, Size: uint64(len(data)), URI: "mwp-artifact:" + digest}
			tc.edit(&m)
			m.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: k.w["w1"].Key.KeyID, CreatedAt: m.CreatedAt}
			raw, err := protocol.SignedValue(m, k.w["w1"].Key)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			p := &protocol.PublishArtifactPayload{Manifest: m, OwnershipEpoch: protocol.Uint64(w.Ownership.OwnershipEpoch), LeaseID: w.Lease.LeaseID}
			if tc.code == "" {
				k.ok(k.w["w1"], protocol.CmdArtifactPublish, p)
				return
			}
			k.refuse(k.w["w1"], protocol.CmdArtifactPublish, p, tc.code)
		})
	}
}
