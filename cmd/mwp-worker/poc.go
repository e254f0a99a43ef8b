package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
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
			"Each fault's moment is made by the driver (hold points in worker-1's handlers), not waited for.\n" +
			"Every stage handler is a Python program over mwp-slot/1 (--handlers go runs their Go twins; without\n" +
			"python3 the Go ones run and the output says so); the report names each stage's handler language.\n" +
			"Exit 0 only when both Missions are approved, every chosen fault was injected and held and every\n" +
			"invariant held; otherwise one stderr line names each problem (poc: FAILED: ...).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "auto-approve", Usage: "approve as the MissionOwner without waiting for a human", Sources: cli.EnvVars("MWP_POC_AUTO_APPROVE"), Local: true},
			&cli.StringFlag{Name: "faults", Usage: "faults to inject: all, or a comma list", Sources: cli.EnvVars("MWP_POC_FAULTS"), Local: true},
			&cli.StringFlag{Name: "data", Usage: "keep every store of the run in this directory", Sources: cli.EnvVars("MWP_POC_DATA"), Local: true},
			&cli.BoolFlag{Name: "json", Usage: "print the report as one JSON object", Local: true},
			&cli.DurationFlag{Name: "timeout", Usage: "bound on the whole run", DefaultText: "3m, 30m when a human approves", Local: true},
			&cli.BoolFlag{Name: "verbose", Usage: "log every component to stderr", Local: true},
			&cli.StringFlag{Name: "handlers", Value: "python", Usage: "the stage handlers: python (the reference; Go when python3 is missing) or go", Local: true},
		},
		Action:   runPoc,
		Commands: []*cli.Command{pocApproveCommand()},
	}
}

func pocApproveCommand() *cli.Command {
	return &cli.Command{
		Name:      "approve",
		Usage:     "decide on a Mission awaiting approval in a running `poc --data DIR`",
		ArgsUsage: "MISSION",
		Description: "Reads DIR/approval.json (written by the running proof of concept, readable by its user only),\n" +
			"shows the Mission's evidence and artifacts, signs the decision with the MissionOwner's key of the run\n" +
			"and sends it through the approval page. With --decision approve|request-changes it decides without\n" +
			"asking (for scripts; with request-changes each non-blank line of --comment is one change); without it\n" +
			"it asks on the terminal, and refuses at once when stdin is not a terminal.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the --data directory of the running poc", Required: true, Sources: cli.EnvVars("MWP_POC_DATA")},
			&cli.StringFlag{Name: "decision", Usage: "approve or request-changes, without asking"},
			&cli.StringFlag{Name: "comment", Usage: "with --decision: the comment (request-changes: one change per non-blank line)"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			stderr := cmd.Root().ErrWriter
			fail := func(err any) error {
				fmt.Fprintln(stderr, "poc approve:", oneLine(fmt.Sprint(err)))
				return exitError{1}
			}
			if cmd.Args().Len() != 1 {
				return fail("exactly one MISSION id is required")
			}
			decision, scripted := cmd.String("decision"), cmd.IsSet("decision")
			switch {
			case scripted && decision != "approve" && decision != "request-changes":
				return fail(fmt.Sprintf("--decision must be approve or request-changes, not %q", decision))
			case !scripted && cmd.IsSet("comment"):
				return fail("--comment needs --decision")
			case scripted && decision == "request-changes" && len(poc.ChangeLines(cmd.String("comment"))) == 0:
				return fail("--decision request-changes needs --comment with at least one change")
			}
			in := cmd.Root().Reader
			if in == nil {
				in = os.Stdin
			}
			if !scripted && !isTerminal(in) {
				return fail("stdin is not a terminal: pass --decision approve|request-changes [--comment TEXT]")
			}
			client, err := poc.ReadAPIClient(cmd.String("data"))
			if err != nil {
				return fail(err)
			}
			key, err := protocol.LoadPrivateKey(client.Info.KeyFile)
			if err != nil {
				return fail(err)
			}
			approver := poc.Approver{Human: protocol.Actor{Kind: protocol.ActorHuman, ID: client.Info.Human}, Key: key, Submit: client.Submit}
			if scripted {
				err = poc.ApproveNonInteractive(ctx, cmd.Root().Writer, client, approver, clock.Real{}, cmd.Args().First(), decision == "approve", cmd.String("comment"))
			} else {
				err = poc.AskDecision(ctx, in, cmd.Root().Writer, client, approver, clock.Real{}, cmd.Args().First(), poc.ShowReview(ctx, client))
			}
			if err != nil {
				return fail(err)
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
	if h := cmd.String("handlers"); h != "python" && h != "go" {
		fmt.Fprintf(stderr, "poc: --handlers must be python or go, not %q\n", h)
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
		Out: progress, Logger: logger, Timeout: cmd.Duration("timeout"), GoHandlers: cmd.String("handlers") == "go"})
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
	if problems := rep.Problems(); len(problems) > 0 {
		fmt.Fprintln(stderr, "poc: FAILED:", strings.Join(problems, "; "))
		return exitError{1}
	}
	if dir := cmd.String("data"); dir != "" {
		fmt.Fprintf(progress, "stores and timeline kept in %s (timeline.svg)\n", dir)
	}
	return nil
}
