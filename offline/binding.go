package offline

import (
	"encoding/json"

	"github.com/missionweave/mwp-worker/protocol"
)

// Bufferable reports whether a Command of type t may be buffered while
// offline. Spec 11.5 allows signed progress and checkpoints (and the Message
// they may carry); usage records carry the offline charge. Everything else —
// starts, submissions, blocks, publications, failures — waits for the
// authority.
func Bufferable(t protocol.CommandType) bool {
	switch t {
	case protocol.CmdLeaseRenew, protocol.CmdWorkCheckpoint, protocol.CmdResourceUsageRecord, protocol.CmdMessagePost:
		return true
	}
	return false
}

// Bind attaches b to cmd as the critical bounded-offline-execution
// extension, keeping any other extension.
func Bind(cmd *protocol.Command, b protocol.OfflineBinding) error {
	data, err := json.Marshal(b)
	if err != nil {
		return err
	}
	exts := make(protocol.Extensions, len(cmd.Extensions)+1)
	for k, v := range cmd.Extensions {
		exts[k] = v
	}
	exts[protocol.OfflineExtensionURI] = protocol.Extension{Critical: true, Data: data}
	cmd.Extensions = exts
	return nil
}

// SignBuffered binds b to cmd, stamps issuedAt with the buffering time and
// signs it: the bytes to Append while offline.
func SignBuffered(cmd *protocol.Command, b protocol.OfflineBinding, key protocol.PrivateKey) ([]byte, error) {
	if err := Bind(cmd, b); err != nil {
		return nil, err
	}
	cmd.IssuedAt = b.BufferedAt
	return protocol.SignedCommand(cmd, key)
}

// leaseRef is the part of the bufferable payloads that names the lease.
type leaseRef struct {
	WorkItemID     *string         `json:"workItemId"`
	OwnershipEpoch *uint64         `json:"ownershipEpoch"`
	LeaseID        *string         `json:"leaseId"`
	UsageDelta     *protocol.Usage `json:"usageDelta"`
}

// BindingOf decodes the offline binding of cmd and checks it against the
// envelope and payload: a critical entry, exactly the binding's members, a
// bufferable type, the binding's agent as the actor, its Group as groupId,
// and for lease-naming payloads its WorkItem, ownership epoch and lease. A
// usage record must charge exactly the binding's delta, so the authority
// records the offline charge once. Any breach is INVALID_COMMAND (a binding
// that lies about its command is malformed, whatever its schema says).
func BindingOf(cmd *protocol.Command) (protocol.OfflineBinding, error) {
	var b protocol.OfflineBinding
	ext, ok := cmd.Extensions[protocol.OfflineExtensionURI]
	if !ok {
		return b, invalid("/extensions", "no %s extension", protocol.OfflineExtensionURI)
	}
	ptr := "/extensions/" + protocol.OfflineExtensionURI
	if !ext.Critical {
		return b, invalid(ptr+"/critical", "the offline binding must be critical")
	}
	if err := protocol.DecodeExact(ext.Data, &b, protocol.CodeInvalidCommand); err != nil {
		if pe, ok := err.(*protocol.Error); ok {
			return b, pe.At(ptr + "/data" + pe.Pointer)
		}
		return b, err
	}
	if err := requireMembers(ext.Data, ptr+"/data"); err != nil {
		return b, err
	}
	if !Bufferable(cmd.Type) {
		return b, invalid("/type", "%s may not be buffered offline", cmd.Type)
	}
	if cmd.Actor.Kind != protocol.ActorAgent || cmd.Actor.ID != b.AgentID {
		return b, invalid(ptr+"/data/agentId", "binding agent %q is not the actor %s:%s", b.AgentID, cmd.Actor.Kind, cmd.Actor.ID)
	}
	if cmd.GroupID != b.GroupID {
		return b, invalid(ptr+"/data/groupId", "binding Group %q is not the command's %q", b.GroupID, cmd.GroupID)
	}
	if cmd.Type == protocol.CmdMessagePost {
		return b, nil // its conversation bound: CheckBufferedMessage
	}
	var p leaseRef
	if err := json.Unmarshal(cmd.Payload, &p); err != nil {
		return b, invalid("/payload", "payload: %v", err)
	}
	switch {
	case p.WorkItemID == nil || *p.WorkItemID != b.WorkItemID:
		return b, invalid("/payload/workItemId", "payload WorkItem differs from the binding's %q", b.WorkItemID)
	case p.OwnershipEpoch == nil || *p.OwnershipEpoch != b.OwnershipEpoch:
		return b, invalid("/payload/ownershipEpoch", "payload ownership epoch differs from the binding's %d", b.OwnershipEpoch)
	case p.LeaseID == nil || *p.LeaseID != b.HistoricalLeaseID:
		return b, invalid("/payload/leaseId", "payload lease differs from the binding's historical lease %q", b.HistoricalLeaseID)
	}
	if cmd.Type == protocol.CmdResourceUsageRecord && (p.UsageDelta == nil || *p.UsageDelta != b.UsageDelta) {
		return b, invalid("/payload/usageDelta", "a buffered usage record must charge exactly the binding's usageDelta")
	}
	return b, nil
}

// bindingMembers are the members every binding carries (docs/wire.md); the exact
// decode refuses unknown ones but would let a missing one read as zero.
var bindingMembers = []string{
	"agentId", "groupId", "workItemId", "originalSessionEpoch", "ownershipEpoch", "historicalLeaseId",
	"disconnectedAt", "bufferedAt", "graceDeadline", "historicalLeaseExpiresAt", "usageDelta",
}

var usageMembers = []string{"money", "tokens", "toolCalls", "computeSeconds", "wallClockSeconds", "sideEffects"}

func requireMembers(data []byte, ptr string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return invalid(ptr, "binding: %v", err)
	}
	for _, k := range bindingMembers {
		if _, ok := m[k]; !ok {
			return invalid(ptr+"/"+k, "binding member %s is missing", k)
		}
	}
	var u map[string]json.RawMessage
	if err := json.Unmarshal(m["usageDelta"], &u); err != nil {
		return invalid(ptr+"/usageDelta", "usageDelta: %v", err)
	}
	for _, k := range usageMembers {
		if _, ok := u[k]; !ok {
			return invalid(ptr+"/usageDelta/"+k, "usage dimension %s is missing", k)
		}
	}
	return nil
}

// NonZeroDimensions lists, in wire order, the names of the dimensions of u
// that are not zero: what a resource_usage_recorded event must account for.
func NonZeroDimensions(u protocol.Usage) []string {
	var out []string
	for i, nonZero := range [...]bool{u.Money != 0, u.Tokens != 0, u.ToolCalls != 0, u.ComputeSeconds != 0, u.WallClockSeconds != 0, u.SideEffects != 0} {
		if nonZero {
			out = append(out, usageMembers[i])
		}
	}
	return out
}

func invalid(ptr, format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.CodeInvalidCommand, format, args...).At(ptr)
}
