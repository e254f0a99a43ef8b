package authoritylite

import (
	"encoding/json"
	"fmt"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// issueTokens attaches a capability token to every event that grants or
// renews an execution lease: bound to the lease id, scoped to the
// contract's allowed tools, operations and data, expiring with the lease.
func (s *Service) issueTokens(gs *groupState, drafts []group.EventDraft) error {
	for _, d := range drafts {
		var lease *protocol.ExecutionLease
		var slot **protocol.CapabilityToken
		switch p := d.Payload.(type) {
		case *group.Started:
			lease, slot = p.Lease, &p.CapabilityToken
		case *group.Progressed:
			lease, slot = p.Lease, &p.CapabilityToken
		}
		if lease == nil {
			continue
		}
		w := gs.g.Items[lease.WorkItemID]
		if w == nil {
			continue
		}
		l := lease
		tok := protocol.CapabilityToken{
			TokenID: fmt.Sprintf("tok-%s-%d", l.LeaseID, len(l.Renewals)), LeaseID: l.LeaseID, AgentID: l.AgentID,
			GroupID: gs.id, WorkItemID: l.WorkItemID, OwnershipEpoch: l.OwnershipEpoch,
			AllowedTools:      append(protocol.List[string]{}, w.Contract.AllowedTools...),
			AllowedOperations: append(protocol.List[string]{}, w.Contract.AllowedOperations...),
			AllowedData:       append(protocol.List[string]{}, w.Contract.AllowedData...),
			IssuedAt:          l.StartedAt, ExpiresAt: l.ExpiresAt,
		}
		if n := len(l.Renewals); n > 0 {
			tok.IssuedAt = l.Renewals[n-1]
		}
		tok.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: s.key.KeyID, CreatedAt: tok.IssuedAt}
		raw, err := protocol.SignedValue(tok, s.key)
		if err != nil {
			return protocol.Errorf(protocol.CodeInternalError, "sign capability token: %v", err)
		}
		if err := json.Unmarshal(raw, &tok); err != nil {
			return err
		}
		*slot = &tok
	}
	return nil
}
