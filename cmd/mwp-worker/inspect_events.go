package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/protocol"
)

func inspectEventsCommand() *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "print the events of an authority-lite log (read-only)",
		Description: "Reads DIR/authority.db or DIR/authority/authority.db (the layout `mwp-worker poc --data DIR`\n" +
			"leaves). With --json: one signed event envelope (docs/wire.md) per line, Organization events first,\n" +
			"then each Group's in sequence order. Without: one summary line per event. Fails while an\n" +
			"authority holds the log. Exit 1 on any problem.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "a data `DIR` holding an authority log", Required: true, Sources: cli.EnvVars("MWP_DATA")},
			&cli.BoolFlag{Name: "json", Usage: "print the envelopes as JSON lines"},
			&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the file lock", Value: 2 * time.Second},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			stderr := cmd.Root().ErrWriter
			path, err := authoritylite.FindLog(cmd.String("data"))
			if err != nil {
				fmt.Fprintln(stderr, "inspect events:", err)
				return exitError{1}
			}
			w := cmd.Root().Writer
			asJSON := cmd.Bool("json")
			err = authoritylite.ReadLog(path, cmd.Duration("timeout"), func(group string, raw []byte) error {
				if asJSON {
					_, err := fmt.Fprintf(w, "%s\n", bytes.TrimSpace(raw))
					return err
				}
				var ev protocol.Event
				if err := json.Unmarshal(raw, &ev); err != nil {
					return err
				}
				agg := ""
				if ev.Aggregate != nil {
					agg = string(ev.Aggregate.Kind) + ":" + ev.Aggregate.ID
				}
				_, err := fmt.Fprintf(w, "%-10s %5d  %-44s %-24s %s %s\n", orDash(group), ev.Seq(), ev.Type, agg, ev.Actor.ID, ev.OccurredAt)
				return err
			})
			if err != nil {
				fmt.Fprintln(stderr, "inspect events:", err)
				return exitError{1}
			}
			return nil
		},
	}
}
