package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/poc"
	"github.com/missionweave/mwp-worker/protocol"
)

func pocCommand() *cli.Command {
	return &cli.Command{
		Name:  "poc",
		Usage: "run the proof of concept: two concurrent missions sharing a worker, human approval, fault suite",
		Description: "Starts authority-lite embedded (over real wss on 127.0.0.1), worker-1 (two slots, serving both\n" +
			"Missions; worker-2 joins only when a fault needs a second worker), one coordinator agent per Mission,\n" +
			"and the approval page for the MissionOwner. Mission A (grp-a, priority high) goes through requirements, implementation,\n" +
			"testing, code review, integration and human approval; Mission B (grp-b, normal) runs at the same time.\n" +
			"Without --auto-approve the run waits for the human on the page (its URL is printed) or for\n" +
			"`mwp-worker poc approve MISSION --data DIR` in another terminal.\n" +
			"--faults all, or a comma list of duplicate-delivery, worker-restart, coordinator-failover,\n" +
			"group-disconnect, lease-expiry, priority-arrival, change-request, injects them for real.\n" +
			"Afterwards the invariants are checked from the durable stores and the report is printed (with --json\n" +
			"one JSON object on stdout, progress on stderr). With --data DIR every store, the fault journal and\n" +
			"timeline.svg stay in DIR (`mwp-worker inspect events --data DIR --json` prints the authority's events).\n" +
			"Exit 0 when both Missions are approved, every injected fault held and every invariant held.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "auto-approve", Usage: "approve as the MissionOwner without waiting for a human", Sources: cli.EnvVars("MWP_POC_AUTO_APPROVE"), Local: true},
			&cli.StringFlag{Name: "faults", Usage: "faults to inject: all, or a comma list", Sources: cli.EnvVars("MWP_POC_FAULTS"), Local: true},
			&cli.StringFlag{Name: "data", Usage: "keep every store of the run in this directory", Sources: cli.EnvVars("MWP_POC_DATA"), Local: true},
			&cli.BoolFlag{Name: "json", Usage: "print the report as one JSON object", Local: true},
			&cli.DurationFlag{Name: "timeout", Usage: "bound on the whole run", DefaultText: "3m, 30m when a human approves", Local: true},
			&cli.BoolFlag{Name: "verbose", Usage: "log every component to stderr", Local: true},
		},
		Action:   runPoc,
		Commands: []*cli.Command{pocApproveCommand()},
	}
}

func pocApproveCommand() *cli.Command {
	return &cli.Command{
		Name:      "approve",
		Usage:     "decide, from a terminal, on a Mission awaiting approval in a running `poc --data DIR`",
		ArgsUsage: "MISSION",
		Description: "Reads DIR/approval.json (written by the running proof of concept, readable by its user only),\n" +
			"shows the Mission's evidence and artifacts, asks approve or request changes (with a comment), signs\n" +
			"the decision with the MissionOwner's key of the run and sends it through the approval page.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the --data directory of the running poc", Required: true, Sources: cli.EnvVars("MWP_POC_DATA")},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			stderr := cmd.Root().ErrWriter
			if cmd.Args().Len() != 1 {
				fmt.Fprintln(stderr, "poc approve: exactly one MISSION id is required")
				return exitError{1}
			}
			client, err := poc.ReadAPIClient(cmd.String("data"))
			if err != nil {
				fmt.Fprintln(stderr, "poc approve:", err)
				return exitError{1}
			}
			key, err := protocol.LoadPrivateKey(client.Info.KeyFile)
			if err != nil {
				fmt.Fprintln(stderr, "poc approve:", err)
				return exitError{1}
			}
			in := cmd.Root().Reader
			if in == nil {
				in = os.Stdin
			}
			approver := poc.Approver{Human: protocol.Actor{Kind: protocol.ActorHuman, ID: client.Info.Human}, Key: key, Submit: client.Submit}
			if err := poc.ApproveFromTerminal(ctx, in, cmd.Root().Writer, client, approver, clock.Real{}, cmd.Args().First()); err != nil {
				fmt.Fprintln(stderr, "poc approve:", err)
				return exitError{1}
			}
			return nil
		},
	}
}

func runPoc(ctx context.Context, cmd *cli.Command) error {
	stdout, stderr := cmd.Root().Writer, cmd.Root().ErrWriter
	faults, err := poc.ParseFaults(cmd.String("faults"))
	if err != nil {
		fmt.Fprintln(stderr, "poc:", err)
		return exitError{1}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := stdout
	if cmd.Bool("json") {
		progress = stderr
	}
	logger := slog.New(slog.DiscardHandler)
	if cmd.Bool("verbose") {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	rep, runErr := poc.Run(ctx, poc.Options{Dir: cmd.String("data"), AutoApprove: cmd.Bool("auto-approve"), Faults: faults,
		Out: progress, Logger: logger, Timeout: cmd.Duration("timeout")})
	if rep != nil {
		var werr error
		if cmd.Bool("json") {
			werr = rep.WriteJSON(stdout)
		} else {
			werr = rep.WriteText(stdout)
		}
		if werr != nil {
			fmt.Fprintln(stderr, "poc:", werr)
			return exitError{1}
		}
	}
	if runErr != nil {
		fmt.Fprintln(stderr, "poc:", runErr)
		return exitError{1}
	}
	if !rep.OK() {
		fmt.Fprintln(stderr, "poc: an invariant or an injected fault did not hold")
		return exitError{1}
	}
	if dir := cmd.String("data"); dir != "" {
		fmt.Fprintf(progress, "stores and timeline kept in %s (timeline.svg)\n", dir)
	}
	return nil
}
