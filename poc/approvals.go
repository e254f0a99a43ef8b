package poc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// PendingMission is one Mission in awaiting_approval, as a human reviews it:
// the evidence and artifact manifests its coordinator submitted (spec 13.2:
// the human approval is the last step of evidence-based review).
type PendingMission struct {
	MissionID string
	GroupID   string
	Title     string
	// Revision is the Mission aggregate revision the page shows; a decision
	// carries it as expectedRevision so a stale page gets REVISION_CONFLICT
	// instead of deciding on something the human has not seen.
	Revision uint64
	// MembershipEpoch is the human's current membership epoch in GroupID.
	MembershipEpoch uint64
	Summary         string
	SubmittedAt     time.Time
	Evidence        []protocol.Evidence
	Artifacts       []protocol.ArtifactManifest
	// Budgets are the Mission's caps (nil: none) and Used what its
	// WorkItems were charged, for the reviewer to weigh the cost.
	Budgets *protocol.Budgets
	Used    protocol.Usage
}

// ApprovalSource is what the approval page and the terminal fallback read:
// the authority's projection of Missions awaiting approval and its
// content-addressed artifact store.
type ApprovalSource interface {
	// Pending lists the Missions in awaiting_approval.
	Pending(ctx context.Context) ([]PendingMission, error)
	// ArtifactBytes returns the stored bytes for a content hash. Callers
	// verify the hash (FetchArtifact); the source is not trusted for it.
	ArtifactBytes(ctx context.Context, contentHash string) ([]byte, error)
}

// SubmitFunc sends one signed Command and returns its receipt, or the
// authority's *protocol.Error.
type SubmitFunc func(ctx context.Context, signed []byte) (protocol.Receipt, error)

// Approver is the human MissionOwner: who decides, the key that signs, and
// where the signed Command goes.
type Approver struct {
	Human  protocol.Actor // kind human
	Key    protocol.PrivateKey
	Submit SubmitFunc
}

// Decision is what a human decided about one Mission.
type Decision struct {
	MissionID string
	Approve   bool   // false: request changes
	Comment   string // required (non-blank) to request changes
	// ExpectedRevision is the Mission revision the human looked at.
	ExpectedRevision uint64
}

// Max lengths of the free text a human types; the page and the terminal
// refuse more rather than truncating what the human said.
const (
	maxCommentBytes = 8 << 10
	maxChanges      = 64
)

// BuildDecision turns a decision on pending mission p into the Command the
// MissionOwner signs: mission.approve or mission.request_changes, with the
// human's membership epoch, the revision the human saw, a fresh actionId and
// issuedAt = now. Request changes lists each non-blank comment line as one
// change and keeps the whole comment. It is pure: ids and time come in.
func BuildDecision(d Decision, p PendingMission, human protocol.Actor, now time.Time, actionID, approvalID string) (*protocol.Command, error) {
	if human.Kind != protocol.ActorHuman {
		return nil, protocol.Errorf(protocol.CodeAuthForbidden, "only a human MissionOwner decides on a Mission, not a %s", human.Kind).At("/actor/kind")
	}
	if d.MissionID != p.MissionID {
		return nil, fmt.Errorf("poc: decision for mission %q built against mission %q", d.MissionID, p.MissionID)
	}
	comment := strings.TrimSpace(d.Comment)
	if len(comment) > maxCommentBytes {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "comment has %d bytes, at most %d", len(comment), maxCommentBytes).At("/payload/comment")
	}
	cmd := &protocol.Command{
		ActionID:         actionID,
		ProtocolVersion:  protocol.Version,
		Actor:            human,
		GroupID:          p.GroupID,
		MembershipEpoch:  protocol.Uint64(p.MembershipEpoch),
		ExpectedRevision: protocol.Uint64(d.ExpectedRevision),
		CorrelationID:    p.MissionID,
		IssuedAt:         protocol.NewTime(now),
	}
	var payload any
	if d.Approve {
		cmd.Type = protocol.CmdMissionApprove
		payload = protocol.ApproveMissionPayload{MissionID: p.MissionID, ApprovalID: approvalID, Comment: comment}
	} else {
		changes := ChangeLines(comment)
		if len(changes) == 0 {
			return nil, protocol.Errorf(protocol.CodeInvalidCommand, "requesting changes needs a comment saying what to change").At("/payload/changes")
		}
		if len(changes) > maxChanges {
			return nil, protocol.Errorf(protocol.CodeInvalidCommand, "%d change lines, at most %d", len(changes), maxChanges).At("/payload/changes")
		}
		cmd.Type = protocol.CmdMissionRequestChanges
		payload = protocol.RequestChangesPayload{MissionID: p.MissionID, Changes: changes, Comment: comment}
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("poc: encode %s payload: %w", cmd.Type, err)
	}
	cmd.Payload = raw
	return cmd, nil
}

// ChangeLines splits a comment into its non-blank, trimmed lines.
func ChangeLines(comment string) []string {
	var out []string
	for line := range strings.Lines(comment) {
		if l := strings.TrimSpace(line); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Decide signs and submits d for the pending Mission p at time now. The
// returned error is the authority's *protocol.Error when it refused.
func (a Approver) Decide(ctx context.Context, d Decision, p PendingMission, now time.Time) (*protocol.Command, protocol.Receipt, error) {
	cmd, err := BuildDecision(d, p, a.Human, now, NewID("act"), NewID("apr"))
	if err != nil {
		return nil, protocol.Receipt{}, err
	}
	signed, err := protocol.SignedCommand(cmd, a.Key)
	if err != nil {
		return nil, protocol.Receipt{}, fmt.Errorf("poc: sign %s: %w", cmd.Type, err)
	}
	if a.Submit == nil {
		return nil, protocol.Receipt{}, fmt.Errorf("poc: approver has no submit function")
	}
	rec, err := a.Submit(ctx, signed)
	if err != nil {
		return cmd, protocol.Receipt{}, fmt.Errorf("poc: %s %s: %w", cmd.Type, p.MissionID, err)
	}
	return cmd, rec, nil
}

// FindPending returns the pending Mission with id missionID. A Mission that
// is no longer awaiting approval is INVALID_STATE_TRANSITION, decided here
// because the page can no longer name its Group or the human's epoch.
func FindPending(ctx context.Context, src ApprovalSource, missionID string) (PendingMission, error) {
	list, err := src.Pending(ctx)
	if err != nil {
		return PendingMission{}, fmt.Errorf("poc: list missions awaiting approval: %w", err)
	}
	for _, p := range list {
		if p.MissionID == missionID {
			return p, nil
		}
	}
	return PendingMission{}, protocol.Errorf(protocol.CodeInvalidStateTransition, "mission %s is not awaiting approval (already decided, or unknown)", missionID)
}

// FetchArtifact returns the bytes of the artifact m describes, refusing
// bytes whose SHA-256 or size differ from the manifest (spec 13.1: verify
// the content hash on every retrieval).
func FetchArtifact(ctx context.Context, src ApprovalSource, m protocol.ArtifactManifest) ([]byte, error) {
	data, err := src.ArtifactBytes(ctx, m.ContentHash)
	if err != nil {
		return nil, fmt.Errorf("poc: fetch artifact %s: %w", m.ContentHash, err)
	}
	if got := protocol.Digest(data); got != m.ContentHash {
		return nil, protocol.Errorf(protocol.CodeSchemaValidationFailed, "artifact bytes hash to %s, manifest says %s", got, m.ContentHash)
	}
	if uint64(len(data)) != m.Size {
		return nil, protocol.Errorf(protocol.CodeSchemaValidationFailed, "artifact %s has %d bytes, manifest says %d", m.ContentHash, len(data), m.Size)
	}
	return data, nil
}

// NewID returns prefix + "-" + 24 random hex digits, a valid wire id.
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return prefix + "-" + hex.EncodeToString(b[:])
}

// AutoApprove approves every Mission awaiting approval, each at the
// revision it is listed with: what `--auto-approve` does for unattended
// runs. It stops at the first refusal and returns the decisions made so far.
func AutoApprove(ctx context.Context, src ApprovalSource, a Approver, clk clock.Clock, comment string) ([]*protocol.Command, error) {
	list, err := src.Pending(ctx)
	if err != nil {
		return nil, fmt.Errorf("poc: list missions awaiting approval: %w", err)
	}
	var done []*protocol.Command
	for _, p := range list {
		cmd, _, err := a.Decide(ctx, Decision{MissionID: p.MissionID, Approve: true, Comment: comment, ExpectedRevision: p.Revision}, p, clk.Now())
		if err != nil {
			return done, err
		}
		done = append(done, cmd)
	}
	return done, nil
}
