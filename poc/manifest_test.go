package poc

import (
	"encoding/json"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/protocol"
)

// ManifestFields are the parts of an artifact manifest that vary.
type ManifestFields struct {
	MediaType  string
	MissionID  string
	GroupID    string
	WorkItemID string
	Sources    []string
	Tools      map[string]string
	Data       []byte
	At         time.Time
}

// SignManifest (for the workers tests play) builds the artifact manifest (spec 13.1) of f.Data as
// produced by agent with its registered card, signed with key.
func SignManifest(s *authoritylite.Service, key protocol.PrivateKey, agent string, f ManifestFields) (protocol.ArtifactManifest, error) {
	card, ok := s.AgentCard(agent)
	if !ok {
		return protocol.ArtifactManifest{}, protocol.Errorf(protocol.CodeAuthForbidden, "poc: %s has no registered Agent Card", agent)
	}
	raw, err := protocol.Marshal(card)
	if err != nil {
		return protocol.ArtifactManifest{}, err
	}
	digest := protocol.Digest(f.Data)
	m := protocol.ArtifactManifest{ContentHash: digest, MediaType: f.MediaType, Schema: protocol.ManifestSchema("", f.MediaType),
		Producer:  protocol.ArtifactProducer{AgentID: agent, AgentVersion: card.AgentVersion, AgentCardHash: protocol.Digest(raw)},
		MissionID: f.MissionID, GroupID: f.GroupID, WorkItemID: f.WorkItemID,
		SourceArtifacts: protocol.List[string](append([]string{}, f.Sources...)), ToolVersions: protocol.StringMap(f.Tools),
		CreatedAt: protocol.NewTime(f.At), Classification: protocol.ClassInternal, Size: uint64(len(f.Data)), URI: "mwp-artifact:" + digest}
	m.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: key.KeyID, CreatedAt: m.CreatedAt}
	signed, err := protocol.SignedValue(m, key)
	if err != nil {
		return protocol.ArtifactManifest{}, err
	}
	var out protocol.ArtifactManifest
	return out, json.Unmarshal(signed, &out)
}
