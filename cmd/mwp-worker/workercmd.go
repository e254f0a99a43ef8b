package main

import (
	"context"
	"errors"
	"io"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/poc"
	"github.com/missionweave/mwp-worker/workercmd"
)

// What run shares with the other long-running commands lives in package
// workercmd, where a Go program embedding handlers gets run itself
// (workercmd.Main); these names keep the commands here reading as before.
type syncWriter = workercmd.SyncWriter

const exitFailedWrite = workercmd.ExitFailedWrite

var (
	opsFlags       = workercmd.OpsFlags
	newLogger      = workercmd.NewLogger
	startOps       = workercmd.StartOps
	stopWhenFailed = workercmd.StopWhenFailed
	failedWrite    = workercmd.FailedWrite
	isTerminal     = workercmd.IsTerminal
	oneLine        = workercmd.OneLine
)

func runCommand() *cli.Command { return workercmd.Command(workercmd.Options{}) }

// upCommand is workercmd's up, asking a terminal for the approval with the
// PoC's review (workercmd does not import the PoC).
func upCommand() *cli.Command { return workercmd.UpCommand(workercmd.Options{Ask: askTerminal}) }

func askTerminal(ctx context.Context, in io.Reader, out io.Writer, a workercmd.Approval) (bool, error) {
	src := poc.ServiceSource{Service: a.Service, Human: a.Owner}
	approver := poc.Approver{Human: a.Owner, Key: a.Key, Submit: poc.SubmitTo(a.Service)}
	err := poc.AskDecision(ctx, in, out, src, approver, clock.Real{}, a.MissionID, poc.ShowReview(ctx, src))
	if errors.Is(err, poc.ErrNoDecision) {
		return false, nil
	}
	return err == nil, err
}
