package group

import "github.com/missionweave/mwp-worker/protocol"

// Payloads of the events the authority's service decides beside the
// Mission and WorkItem state machines.

// MessageEvent is message.posted, message.corrected, message.retracted and
// message.redacted. Messages never change Mission, WorkItem, membership or
// approval state, whatever their text says.
type MessageEvent struct {
	MessageID      string         `json:"messageId"`
	ConversationID string         `json:"conversationId,omitempty"`
	Author         protocol.Actor `json:"author"`
	Text           string         `json:"text,omitempty"`
	MediaType      string         `json:"mediaType,omitempty"`
	ReplyTo        string         `json:"replyTo,omitempty"`
	Artifacts      []string       `json:"artifacts,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	State          string         `json:"state"`
}

// ArtifactPublished is artifact.published: one revision of a
// content-addressed artifact's manifest.
type ArtifactPublished struct {
	Manifest protocol.ArtifactManifest `json:"manifest"`
}

// OverrideConsumed is ext.missionweaveprotocol.core.cooperation_override_consumed:
// a single-use cooperation-override grant was spent by a command.
type OverrideConsumed struct {
	GrantID            string `json:"grantId"`
	Policy             string `json:"policy"`
	ConsumedByActionID string `json:"consumedByActionId"`
	TargetCommandType  string `json:"targetCommandType"`
}

// SnapshotCreated is group.snapshot.created.
type SnapshotCreated struct {
	Snapshot protocol.SnapshotRef `json:"snapshot"`
	Reason   string               `json:"reason"`
}

// GroupArchived is group.archived; the snapshot is the Group's last state.
type GroupArchived struct {
	Snapshot protocol.SnapshotRef `json:"snapshot"`
	Reason   string               `json:"reason,omitempty"`
}

// UsageRecorded is ext.missionweaveprotocol.core.resource_usage_recorded on
// a WorkItem: a six-dimension usage delta and the running total.
type UsageRecorded struct {
	WorkRef
	OwnershipEpoch uint64         `json:"ownershipEpoch"`
	LeaseID        string         `json:"leaseId"`
	UsageDelta     protocol.Usage `json:"usageDelta"`
	UsedTotal      protocol.Usage `json:"usedTotal"`
	// HistoricalSessionEpoch is the session the usage happened under;
	// ReconcilingSessionEpoch the one that reported it (equal when online).
	HistoricalSessionEpoch  uint64 `json:"historicalSessionEpoch"`
	ReconcilingSessionEpoch uint64 `json:"reconcilingSessionEpoch"`
}

// AgentCardRegistered is ext.missionweaveprotocol.registry.agent_card_registered
// (Organization-scoped).
type AgentCardRegistered struct {
	AgentCard     protocol.AgentCard `json:"agentCard"`
	AgentCardHash string             `json:"agentCardHash"`
}
