package main

import (
	"github.com/urfave/cli/v3"

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
)

func runCommand() *cli.Command { return workercmd.Command(workercmd.Options{}) }
