package protocol

import (
	"time"
)

// CapabilityToken lets the holder of an execution lease use the tools and
// data its contract allows (spec 11.3). It is bound to the lease id, not
// the other way round, and expires no later than the lease it was issued
// under; renewing the lease issues a new token. It is a Signed Document of
// the Group Authority and names the agent, so a tool service checks both
// the authority's signature and that the caller proves that agent's key;
// it is therefore safe to carry in the Group's events.
type CapabilityToken struct {
	TokenID           string       `json:"tokenId"`
	LeaseID           string       `json:"leaseId"`
	AgentID           string       `json:"agentId"`
	GroupID           string       `json:"groupId"`
	WorkItemID        string       `json:"workItemId"`
	OwnershipEpoch    uint64       `json:"ownershipEpoch"`
	AllowedTools      List[string] `json:"allowedTools"`
	AllowedOperations List[string] `json:"allowedOperations"`
	AllowedData       List[string] `json:"allowedData"`
	IssuedAt          Time         `json:"issuedAt"`
	ExpiresAt         Time         `json:"expiresAt"`
	Signature         Signature    `json:"signature"`
}

// CheckCapabilityToken verifies a token's signature with keys and that it
// is live at now for leaseID (when leaseID is not empty).
func CheckCapabilityToken(tok *CapabilityToken, keys KeyResolver, leaseID string, now time.Time) error {
	raw, err := Marshal(tok)
	if err != nil {
		return Errorf(CodeAuthInvalidSignature, "capability token: %v", err)
	}
	doc, err := Parse(raw, DecodeOptions{})
	if err != nil {
		return err
	}
	if err := Verify(doc.(map[string]any), keys); err != nil {
		return err
	}
	if leaseID != "" && tok.LeaseID != leaseID {
		return Errorf(CodeWorkLeaseExpired, "capability token %s is bound to lease %s, not %s", tok.TokenID, tok.LeaseID, leaseID)
	}
	if !now.Before(tok.ExpiresAt.Time) {
		return Errorf(CodeWorkLeaseExpired, "capability token %s expired at %s", tok.TokenID, tok.ExpiresAt)
	}
	return nil
}
