package authoritylite

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// publishAt stores data and publishes w1's signed manifest of it under w's
// lease with the given retrieval URI; it returns the digest and the error.
func (k *svc) publishAt(w group.WorkItem, data []byte, uri string) (string, error) {
	k.t.Helper()
	digest, err := k.s.PutArtifact(data)
	if err != nil {
		k.t.Fatal(err)
	}
	card, _ := k.s.AgentCard("w1")
	m := protocol.ArtifactManifest{ContentHash: digest, MediaType: "text/x-diff", Schema: "https://schemas.example/diff",
		Producer:  protocol.ArtifactProducer{AgentID: "w1", AgentVersion: card.AgentVersion, AgentCardHash: k.s.org.agent("w1").CardHash},
		MissionID: "mis-a", GroupID: "grp-a", WorkItemID: w.WorkItemID, SourceArtifacts: protocol.List[string]{}, ToolVersions: protocol.StringMap{"go": "1.26"},
		CreatedAt: protocol.NewTime(k.clk.Now()), Classification: protocol.ClassInternal, Size: uint64(len(data)), URI: uri}
	m.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: k.w["w1"].Key.KeyID, CreatedAt: m.CreatedAt}
	raw, err := protocol.SignedValue(m, k.w["w1"].Key)
	if err != nil {
		k.t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		k.t.Fatal(err)
	}
	_, err = k.do(k.w["w1"], protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: m, OwnershipEpoch: protocol.Uint64(w.Ownership.OwnershipEpoch), LeaseID: w.Lease.LeaseID})
	return digest, err
}

// Spec 13.1: an artifact's bytes live outside the Group log, its identity
// is its content hash and never its (mutable) retrieval URI, and its hash
// is checked whenever it is read back.
func TestArtifactIdentityIsItsContent(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	const uri = "https://files.example/wi-1/latest.diff" // mutable: both versions say it
	v1 := []byte("--- a/x.go\n+++ b/x.go\n@@ first version, unmistakable-marker-0001 @@\n")
	v2 := []byte("--- a/x.go\n+++ b/x.go\n@@ second version, unmistakable-marker-0002 @@\n")
	d1, err := k.publishAt(w, v1, uri)
	if err != nil {
		t.Fatalf("publish v1: %v", err)
	}
	d2, err := k.publishAt(w, v2, uri)
	if err != nil {
		t.Fatalf("publish v2 under the same URI: %v", err)
	}
	if d1 == d2 {
		t.Fatal("two contents, one digest")
	}

	// Two artifacts, each the aggregate of its own content hash.
	var published []string
	for _, ev := range checkLog(t, k.s, "grp-a") {
		if ev.Type == protocol.EvtArtifactPublished {
			published = append(published, ev.Aggregate.ID)
			var p group.ArtifactPublished
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Manifest.ContentHash != ev.Aggregate.ID {
				t.Fatalf("artifact event of %s carries the manifest of %s", ev.Aggregate.ID, p.Manifest.ContentHash)
			}
		}
	}
	if len(published) != 2 || published[0] != d1 || published[1] != d2 {
		t.Fatalf("artifacts in the log %v, want %s then %s (one per content, the shared URI no identity)", published, d1, d2)
	}
	for d, want := range map[string][]byte{d1: v1, d2: v2} {
		got, err := k.s.Artifact(d)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Artifact(%s) = %q, %v; want its own content", d, got, err)
		}
	}

	// The bytes are nowhere in the log, raw or encoded.
	evs, err := k.s.Events("grp-a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, content := range [][]byte{v1, v2} {
		marker := content[bytes.Index(content, []byte("unmistakable")):]
		marker = marker[:bytes.IndexByte(marker, ' ')]
		for _, enc := range [][]byte{marker, []byte(base64.StdEncoding.EncodeToString(content)), []byte(hex.EncodeToString(content))} {
			for _, se := range evs {
				if bytes.Contains(se.Raw, enc) {
					t.Fatalf("artifact content in the Group log: %s", se.Raw)
				}
			}
		}
	}

	// Reading back checks the hash: bytes changed in the store are refused.
	path, err := k.s.artifactPath(d1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, v2, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := k.s.Artifact(d1); err == nil {
		t.Fatalf("Artifact(%s) returned %q from a store whose bytes no longer hash to it", d1, got)
	}
}
