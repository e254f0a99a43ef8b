package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/queue"
)

const compactDescription = "bbolt reuses the pages freed by deletions (retention, archiving, pruning) but never gives them back\n" +
	"to the file system; this rewrites the stopped store with bbolt's own Compact into FILE.compact beside it, fsyncs\n" +
	"it, and renames it over the file, so the file shrinks to what is live. The store must not be in use: a running\n" +
	"process holding it is named and nothing changes. On any failure the original is kept. It prints the sizes\n" +
	"before and after. docs/operations.md, Disk."

func compactCommand() *cli.Command {
	return &cli.Command{
		Name:        "compact",
		Usage:       "give a stopped worker store's free pages back to the file system (offline)",
		Description: "Rewrites DIR/" + queue.FileName + ". " + compactDescription,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the worker's data directory", Required: true, Sources: cli.EnvVars("MWP_DATA")},
			&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the file lock", Value: 2 * time.Second},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			path := filepath.Join(cmd.String("data"), queue.FileName)
			res, err := storecheck.CompactFile(path, cmd.Duration("timeout"), nil)
			return printCompact(cmd, "compact", res, err)
		},
	}
}

func authorityCompactCommand() *cli.Command {
	return &cli.Command{
		Name:  "compact",
		Usage: "give a stopped authority log's free pages back to the file system (offline)",
		Description: "Rewrites DIR/authority.db (or DIR/authority/authority.db of a `run` or `poc` data directory) and\n" +
			"records the new file's last transaction in DIR/authority.head. " + compactDescription,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the authority's data directory", Required: true, Sources: cli.EnvVars("MWP_AUTHORITY_DATA")},
			&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the file lock", Value: 2 * time.Second},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			path, err := authoritylite.FindLog(cmd.String("data"))
			if err != nil {
				return printCompact(cmd, "authority compact", storecheck.CompactResult{}, err)
			}
			res, err := authoritylite.CompactLog(path, cmd.Duration("timeout"))
			return printCompact(cmd, "authority compact", res, err)
		},
	}
}

func printCompact(cmd *cli.Command, name string, res storecheck.CompactResult, err error) error {
	if err != nil {
		fmt.Fprintf(cmd.Root().ErrWriter, "%s: %v\n", name, err)
		return exitError{1}
	}
	fmt.Fprintf(cmd.Root().Writer, "%s: %s from %s to %s\n", name, res.Path, sizeString(res.Before), sizeString(res.After))
	return nil
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB (%d bytes)", float64(n)/(1<<30), n)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
	}
	return fmt.Sprintf("%d bytes", n)
}
