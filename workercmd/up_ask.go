package workercmd

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/review"
)

// inIsTerminal reports whether up may ask on its input; tests stand a
// pipe in for a terminal.
var inIsTerminal = IsTerminal

// askTerminal is up's own Asker: the Mission's review (package review, as
// `mwp-worker up` shows it), then the decision, signed as the owner.
func askTerminal(ctx context.Context, in io.Reader, out io.Writer, a Approval) (bool, error) {
	evs, err := a.Service.Events(a.GroupID, 0, 0)
	if err != nil {
		return false, err
	}
	v, err := review.Load(a.GroupID, evs, func(e wss.StoredEvent) []byte { return e.Raw })
	if err != nil {
		return false, err
	}
	fetch := func(_ context.Context, digest string) ([]byte, error) { return a.Service.Artifact(digest) }
	if err := v.Show(ctx, out, v.Summary(), fetch); err != nil {
		return false, err
	}
	ans, err := review.Ask(in, out)
	if errors.Is(err, review.ErrNoDecision) {
		fmt.Fprintf(out, "no decision: %v\n", err)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if ans.Approve {
		err = autoApprove(ctx, a, ans.Comment)
	} else {
		err = requestChanges(ctx, a, ans.Comment)
	}
	if err != nil {
		fmt.Fprintf(out, "Refused: %s: %s\n", protocol.CodeOf(err), OneLine(err.Error()))
		return false, err
	}
	typ := protocol.CmdMissionApprove
	if !ans.Approve {
		typ = protocol.CmdMissionRequestChanges
	}
	fmt.Fprintf(out, "Accepted: %s\n", typ)
	return true, nil
}

// requestChanges sends a's Mission back as its owner, one change per
// non-blank line of comment.
func requestChanges(ctx context.Context, a Approval, comment string) error {
	m, ok := a.Service.Mission(a.GroupID)
	if !ok || m.State != protocol.MissionAwaitingApproval {
		return fmt.Errorf("mission %s is not awaiting approval", a.MissionID)
	}
	_, err := a.Service.Principal(a.Owner, a.Key).Do(ctx, protocol.CmdMissionRequestChanges, a.GroupID,
		&protocol.RequestChangesPayload{MissionID: a.MissionID, Changes: review.ChangeLines(comment), Comment: comment},
		func(e *protocol.Envelope) { e.ExpectedRevision = protocol.Uint64(m.Revision) })
	if err != nil {
		return fmt.Errorf("mission.request_changes: %w", err)
	}
	return nil
}
