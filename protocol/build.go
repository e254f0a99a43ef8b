package protocol

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Envelope holds the optional members of a Command that depend on who
// sends it and where (spec 15.1 presence rules).
type Envelope struct {
	GroupID          string
	SessionEpoch     *uint64
	MembershipEpoch  *uint64
	CoordinatorEpoch *uint64
	ExpectedRevision *uint64
	OverrideGrantID  string
	CorrelationID    string
	Extensions       Extensions
	// ActionID, when set, is used instead of a fresh one.
	ActionID string
}

// NewActionID returns a fresh action id issued at now: 48 bits of Unix
// milliseconds, then 48 random bits, in hex. Ids of one actor then sort
// by issue time, as a ULID does, so the authority's receipts of a sender
// land at the end of its key range instead of on a random page each.
func NewActionID(now time.Time) string {
	var b [12]byte
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err)
	}
	ms := uint64(now.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	return "act-" + hex.EncodeToString(b[:])
}

// BuildCommand assembles and signs a Command from its parts, issued at now,
// and returns it with its signed JCS bytes.
func BuildCommand(actor Actor, key PrivateKey, typ CommandType, env Envelope, payload any, now time.Time) (*Command, []byte, error) {
	p, err := json.Marshal(payload)
	if err != nil {
		return nil, nil, err
	}
	id := env.ActionID
	if id == "" {
		id = NewActionID(now)
	}
	corr := env.CorrelationID
	if corr == "" {
		corr = id
	}
	cmd := &Command{
		ActionID: id, ProtocolVersion: Version, Actor: actor, Type: typ, GroupID: env.GroupID,
		SessionEpoch: env.SessionEpoch, MembershipEpoch: env.MembershipEpoch, CoordinatorEpoch: env.CoordinatorEpoch,
		ExpectedRevision: env.ExpectedRevision, CooperationOverrideGrantID: env.OverrideGrantID,
		CorrelationID: corr, IssuedAt: NewTime(now), Payload: p, Extensions: env.Extensions,
	}
	raw, err := SignedCommand(cmd, key)
	if err != nil {
		return nil, nil, err
	}
	return cmd, raw, nil
}
