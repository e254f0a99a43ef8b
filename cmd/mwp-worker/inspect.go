package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/urfave/cli/v3"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:     "inspect",
		Commands: []*cli.Command{inspectEventsCommand()},
		Usage:    "show the Groups, cursors, queues and outbox of a worker store (read-only)",
		Description: "Reads DIR/" + queue.FileName + " without changing it. While a worker runs it holds the file\n" +
			"lock, so inspect asks it for a consistent copy over DIR/" + queue.SocketName + " instead; only then\n" +
			"does the output include each Group's in-memory reorder buffer (events held beyond a gap).\n" +
			"--json prints one object: {path, schema, live, workerPid?, groups: [{groupId, cursor,\n" +
			"inboxEvents, inboxFirst?, inboxLast?, snapshot?, mission, buffer?, items: [{workItemId, state,\n" +
			"urgency?, deadline?, owner?, ownershipEpoch?, leaseId?, leaseExpiresAt?}]}], outbox: {pending,\n" +
			"commands: [{actionId, type?, groupId?, putAt}]}, orgEvents}. Exit 1 on any problem.",
		Flags: []cli.Flag{
			// Not Required: `inspect events` has its own --data.
			&cli.StringFlag{Name: "data", Usage: "the worker's data `DIR` (required)", Sources: cli.EnvVars("MWP_DATA")},
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of tables"},
			&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the file lock or the running worker", Value: 2 * time.Second, Sources: cli.EnvVars("MWP_INSPECT_TIMEOUT")},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.String("data") == "" {
				return usagef(cmd, `Required flag "data" not set`)
			}
			r, err := queue.OpenReader(cmd.String("data"), cmd.Duration("timeout"))
			if err != nil {
				fmt.Fprintln(cmd.Root().ErrWriter, "inspect:", err)
				return exitError{1}
			}
			rep, err := r.Report()
			r.Close()
			if err != nil {
				fmt.Fprintln(cmd.Root().ErrWriter, "inspect:", err)
				return exitError{1}
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return printReport(w, rep)
		},
	}
}

func printReport(w io.Writer, rep queue.Report) error {
	source := "worker not running"
	if rep.Live {
		source = fmt.Sprintf("copy served by the running worker, pid %d", rep.WorkerPID)
	}
	fmt.Fprintf(w, "store %s (schema %d, %s)\n", rep.Path, rep.Schema, source)
	fmt.Fprintf(w, "outbox: %d pending command(s)\n", rep.Outbox.Pending)
	for _, c := range rep.Outbox.Commands {
		fmt.Fprintf(w, "  %s %s %s since %s\n", c.ActionID, orDash(string(c.Type)), orDash(c.GroupID), c.PutAt)
	}
	fmt.Fprintf(w, "organization events: %d\n", rep.OrgEvents)
	for _, g := range rep.Groups {
		fmt.Fprintf(w, "\ngroup %s: cursor %d, inbox %d event(s)", g.GroupID, g.Cursor, g.InboxEvents)
		if g.InboxEvents > 0 {
			fmt.Fprintf(w, " [%d..%d]", g.InboxFirst, g.InboxLast)
		}
		if g.Snapshot != nil {
			fmt.Fprintf(w, ", restored snapshot %s at %d", g.Snapshot.SnapshotID, g.Snapshot.Sequence)
		}
		fmt.Fprintln(w)
		if d := g.Divergence; d != nil {
			fmt.Fprintf(w, "DIVERGED at sequence %d (detected %s): %s; nothing more of this Group is applied; stop the worker and run `mwp-worker resync --data DIR --group %s`\n",
				d.Sequence, d.DetectedAt, d.Describe(), g.GroupID)
		}
		if m := g.Mission; m.MissionID != "" {
			fmt.Fprintf(w, "mission %s: %s, priority %s", m.MissionID, m.State, orDash(string(m.PriorityClass)))
			if m.Archived {
				fmt.Fprint(w, ", archived")
			}
			fmt.Fprintln(w)
		}
		if len(g.Members) > 0 {
			fmt.Fprint(w, "members:")
			for i, m := range g.Members {
				sep := ","
				if i == 0 {
					sep = ""
				}
				fmt.Fprintf(w, "%s %s:%s epoch %d %s", sep, m.Principal.Kind, m.Principal.ID, m.Epoch, m.State)
			}
			fmt.Fprintln(w)
		}
		if b := g.Buffer; b != nil {
			fmt.Fprintf(w, "buffered: %d event(s), %d bytes; missing after %d, before %d\n", b.Events, b.Bytes, b.Cursor, b.FirstHeld)
		}
		if len(g.Items) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ITEM\tSTATE\tURGENCY\tDEADLINE\tOWNER\tEPOCH\tLEASE EXPIRES")
		for _, it := range g.Items {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.WorkItemID, it.State, orDash(string(it.Urgency)),
				timeOrDash(it.Deadline), orDash(it.Owner), epochOrDash(it.Owner, it.OwnershipEpoch), timeOrDash(it.LeaseExpiresAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t protocol.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.String()
}

func epochOrDash(owner string, epoch uint64) string {
	if owner == "" {
		return "-"
	}
	return fmt.Sprint(epoch)
}
