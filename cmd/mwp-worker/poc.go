package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/poc"
)

func pocCommand() *cli.Command {
	return &cli.Command{
		Name:  "poc",
		Usage: "run the proof of concept: two concurrent missions sharing a worker, human approval, fault suite",
		Description: "Starts authority-lite embedded (over real wss on 127.0.0.1), two workers (worker-1 with two slots\n" +
			"serves both Missions, worker-2 serves Mission A), one coordinator agent per Mission, and the approval\n" +
			"page for the MissionOwner. Mission A (grp-a, priority high) goes through requirements, implementation,\n" +
			"testing, code review, integration and human approval; Mission B (grp-b, normal) runs at the same time.\n" +
			"Without --auto-approve the run waits for the human on the page (its URL is printed).\n" +
			"--faults all, or a comma list of duplicate-delivery, worker-restart, coordinator-failover,\n" +
			"group-disconnect, lease-expiry, priority-arrival, change-request, injects them for real.\n" +
			"Afterwards the invariants are checked from the durable stores and the report is printed (with --json\n" +
			"one JSON object on stdout, progress on stderr). With --data DIR every store, the fault journal and\n" +
			"timeline.svg stay in DIR (`mwp-worker inspect events --data DIR --json` prints the authority's events).\n" +
			"Exit 0 when both Missions are approved, every injected fault held and every invariant held.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "auto-approve", Usage: "approve as the MissionOwner without waiting for a human", Sources: cli.EnvVars("MWP_POC_AUTO_APPROVE")},
			&cli.StringFlag{Name: "faults", Usage: "faults to inject: all, or a comma list", Sources: cli.EnvVars("MWP_POC_FAULTS")},
			&cli.StringFlag{Name: "data", Usage: "keep every store of the run in this directory", Sources: cli.EnvVars("MWP_POC_DATA")},
			&cli.BoolFlag{Name: "json", Usage: "print the report as one JSON object"},
			&cli.DurationFlag{Name: "timeout", Usage: "bound on the whole run (default 3m, 30m when a human approves)"},
			&cli.BoolFlag{Name: "verbose", Usage: "log every component to stderr"},
		},
		Action: runPoc,
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
