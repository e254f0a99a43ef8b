package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/queue"
)

func resyncCommand() *cli.Command {
	return &cli.Command{
		Name:  "resync",
		Usage: "forget a Group's local history so the next run replays it from the authority (after a divergence)",
		Description: "For each --group, deletes what DIR/" + queue.FileName + " holds of it (inbox, cursor, queue, memberships,\n" +
			"restored snapshot, divergence) and keeps the Group, empty: the next `run` subscribes from sequence 0\n" +
			"and replays the authority's log, or restores its signed snapshot. Use it when inspect shows a Group\n" +
			"DIVERGED (the authority issued other events under sequences this worker applied). The worker must\n" +
			"be stopped. Prints one line per Group: `group ID reset: cursor was N`. Exit 1 on any problem, and\n" +
			"then nothing is reset of the Group named in the error or after it.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the worker's data `DIR`", Required: true, Sources: cli.EnvVars("MWP_DATA")},
			&cli.StringSliceFlag{Name: "group", Usage: "a `GROUP` to resync (repeatable)", Required: true},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			fail := func(format string, args ...any) error {
				fmt.Fprintf(cmd.Root().ErrWriter, "resync: "+format+"\n", args...)
				return exitError{1}
			}
			dir := cmd.String("data")
			path := filepath.Join(dir, queue.FileName)
			if _, err := os.Stat(path); err != nil {
				return fail("no worker store at %s", path)
			}
			s, err := queue.Open(dir, queue.Options{NoSocket: true, NoPopulate: true})
			if errors.Is(err, queue.ErrLocked) {
				return fail("%v; stop it first", err)
			}
			if err != nil {
				return fail("%v", err)
			}
			defer s.Close()
			for _, g := range cmd.StringSlice("group") {
				had, err := s.ResetGroup(g)
				if err != nil {
					return fail("%v", err)
				}
				fmt.Fprintf(cmd.Root().Writer, "group %s reset: cursor was %d\n", g, had)
			}
			return nil
		},
	}
}
