package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/missionweave/mwp-worker/scheduler/simulate"
	"github.com/urfave/cli/v3"
)

func schedulerCommand() *cli.Command {
	return &cli.Command{
		Name:  "scheduler",
		Usage: "operator tools for the global scheduler",
		Commands: []*cli.Command{{
			Name:      "simulate",
			Usage:     "run the real scheduler against a workload on a simulated clock and print every decision",
			ArgsUsage: "FILE",
			Description: "FILE (or - for stdin) is JSON:\n" +
				`  {"slots": 2, "groups": [{"id": "g1", "weight": 1, "quota": 2}],` + "\n" +
				`   "items": [{"id": "a1", "group": "g1", "urgency": "low|normal|high|critical", "arrivalMs": 0,` + "\n" +
				`              "durationMs": 100, "deadlineMs": 5000, "preemptible": true}], "checkpointMs": 0}` + "\n" +
				"quota, deadlineMs (absolute) and preemptible (default true) are optional; unknown members are errors.\n" +
				"A preempted item keeps working for checkpointMs to reach its checkpoint, frees its slot, re-enters\n" +
				"its Group queue and later resumes with its remaining duration.\n" +
				"With --json: one line per decision {atMs, action: start|preempt|finish, item, group, slot, and on a preempt\n" +
				"for: the waiting item the slot is asked for}, in time\n" +
				"order, then {\"summary\": ...} with each Group's share of slot-time, waits and deadline misses.\n" +
				"Bad input: a message on stderr and exit status 1.",
			Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON lines instead of a table"}},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				errOut := cmd.Root().ErrWriter
				if cmd.NArg() != 1 {
					fmt.Fprintln(errOut, "mwp-worker scheduler simulate: takes exactly one FILE (or - for stdin)")
					return exitError{1}
				}
				name := cmd.Args().First()
				res, err := simulateFile(name)
				if err != nil {
					fmt.Fprintf(errOut, "mwp-worker scheduler simulate: %s: %v\n", name, err)
					return exitError{1}
				}
				out := cmd.Root().Writer
				if cmd.Bool("json") {
					return simulate.WriteJSON(out, res)
				}
				return writeSimTable(out, res)
			},
		}},
	}
}

func simulateFile(name string) (*simulate.Result, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	in, err := simulate.Decode(r)
	if err != nil {
		return nil, err
	}
	return simulate.Run(in)
}

func writeSimTable(w io.Writer, r *simulate.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "AT MS\tACTION\tSLOT\tGROUP\tITEM\t")
	for _, e := range r.Events {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t\n", e.AtMs, e.Action, e.Slot, e.Group, e.Item)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := r.Summary
	fmt.Fprintf(w, "\nend %d ms, slot-time %d ms, %d preemptions, %d deadline misses\n\n",
		s.EndMs, s.SlotTimeMs, s.Preemptions, s.DeadlineMisses)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "GROUP\tWEIGHT\tWEIGHT SHARE\tSLOT-TIME MS\tSHARE\tITEMS\tMAX WAIT MS\tMEAN WAIT MS\tMISSES\tPREEMPTED\t")
	for _, g := range s.Groups {
		fmt.Fprintf(tw, "%s\t%d\t%.4f\t%d\t%.4f\t%d\t%d\t%.1f\t%d\t%d\t\n", g.ID, g.Weight, g.WeightShare,
			g.SlotTimeMs, g.Share, g.Items, g.MaxWaitMs, g.MeanWaitMs, g.DeadlineMisses, g.Preemptions)
	}
	return tw.Flush()
}
