package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/review"
)

// missionDecisionCommand is approve, request-changes or cancel: one
// command by the human of --owner-key, one line of result.
func missionDecisionCommand(name, usage string) *cli.Command {
	flags := append(authorityFlags(), &cli.StringFlag{Name: "comment", Usage: "the decision's comment (cancel: its reason)", Sources: cli.EnvVars("MWP_COMMENT")})
	if name == "request-changes" {
		flags = append(flags, &cli.StringSliceFlag{Name: "change", Usage: "one change asked for (repeatable; default: the comment)"})
	}
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: "MISSION",
		Description: "Finds MISSION's Group, reads its log (verified with --authority-key) for the sender's current\n" +
			"membership epoch, and sends the decision. Prints \"mission MISSION STATE event SEQUENCE\" on one\n" +
			"line; a refusal prints \"CODE: message\" on stderr and exits 1 (e.g. INVALID_STATE_TRANSITION\n" +
			"for an approval of a Mission not awaiting approval, AUTH_FORBIDDEN for a member who may not).",
		Flags: flags,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return decideMission(ctx, cmd, name)
		},
	}
}

func decideMission(ctx context.Context, cmd *cli.Command, name string) error {
	missionID := cmd.Args().First()
	comment := cmd.String("comment")
	var typ protocol.CommandType
	var payload any
	switch name {
	case "approve":
		typ = protocol.CmdMissionApprove
	case "request-changes":
		typ = protocol.CmdMissionRequestChanges
		changes := cmd.StringSlice("change")
		if len(changes) == 0 && comment != "" {
			changes = []string{comment}
		}
		if len(changes) == 0 {
			return usagef(cmd, "say what to change: --change TEXT or --comment TEXT")
		}
		payload = &protocol.RequestChangesPayload{MissionID: missionID, Changes: changes, Comment: comment}
	case "cancel":
		typ = protocol.CmdMissionCancel
		reason := comment
		if reason == "" {
			reason = "cancelled by its owner"
		}
		payload = &protocol.CancelMissionPayload{MissionID: missionID, Reason: reason}
	}
	a, key, err := dialHuman(ctx, cmd, true)
	if err != nil {
		return failOrUsage(cmd, err)
	}
	g, err := a.MissionGroup(ctx, missionID)
	if err != nil {
		return refusal(cmd, err)
	}
	v := review.NewView(g)
	if err := loadView(ctx, v, a); err != nil {
		return refusal(cmd, err)
	}
	if typ == protocol.CmdMissionApprove {
		rev := v.Revision()
		// One approval id per Mission revision: the approval of what was
		// submitted, the same for a retry.
		sum := sha256.Sum256([]byte(missionID + "\x00" + strconv.FormatUint(rev, 10)))
		payload = &protocol.ApproveMissionPayload{MissionID: missionID, ApprovalID: "apr-" + hex.EncodeToString(sum[:12]), Comment: comment}
	}
	env := protocol.Envelope{GroupID: g, MembershipEpoch: protocol.Uint64(v.MembershipEpoch(a.Actor())), CorrelationID: missionID}
	_, raw, err := protocol.BuildCommand(a.Actor(), key, typ, env, payload, time.Now())
	if err != nil {
		return refusal(cmd, err)
	}
	rec, err := a.Submit(ctx, raw)
	if err != nil {
		return refusal(cmd, err)
	}
	if err := loadView(ctx, v, a); err != nil {
		return refusal(cmd, err)
	}
	var seq uint64
	if n := len(rec.Events); n > 0 && rec.Events[0].Sequence != nil {
		seq = *rec.Events[0].Sequence
	}
	fmt.Fprintf(cmd.Root().Writer, "mission %s %s event %d\n", missionID, v.Status().State, seq)
	return nil
}
