package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// Exit statuses of the check commands.
const (
	checkSound   = 0
	checkDamaged = 1
	checkFailed  = 2 // the check could not run
)

const checkShape = "--json prints one object (docs/shapes.md): {path, store, meta: {pages: [{page, valid, txid,\n" +
	"highWater, problem?}], used, pageSize, fileSize}, structureChecked, signaturesChecked, groups: [{groupId,\n" +
	"events, first?, last?, cursor?, damaged, diverged?}], orgEvents, notes, problems: [{where, groupId?, sequence?, what}], ok}.\n" +
	"Exit 0 when nothing is wrong, 1 when damage is found, 2 when the check could not run."

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "verify a worker store in full: pages, inbox sequences, cursors, event signatures (read-only)",
		Description: "Reads DIR/" + queue.FileName + " without changing it (from the copy a running worker serves, like inspect):\n" +
			"both bbolt meta pages, bbolt's page check, every Group's inbox (consecutive sequences from its base, each event\n" +
			"decoding and verifying with the authority's key, the cursor at the last stored event) and the Organization\n" +
			"events. The key is --authority-key FILE, or DIR/authority/authority.pub of an embedded authority; without one\n" +
			"signatures are not checked (said in notes). A damaged store is rebuilt from the authority: docs/operations.md.\n" +
			checkShape,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the worker's data directory", Required: true, Sources: cli.EnvVars("MWP_DATA")},
			&cli.StringFlag{Name: "authority-key", Usage: "the authority's public key FILE (authority.pub)", Sources: cli.EnvVars("MWP_AUTHORITY_KEY")},
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"},
			&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the file lock or the running worker", Value: 2 * time.Second},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			stderr := cmd.Root().ErrWriter
			dir := cmd.String("data")
			var keys protocol.KeyResolver
			var note string
			keyPath := cmd.String("authority-key")
			if keyPath == "" {
				if p := filepath.Join(dir, "authority", "authority.pub"); fileExists(p) {
					keyPath, note = p, "signatures checked with the embedded authority's key "+p
				}
			}
			if keyPath != "" {
				k, err := protocol.LoadPublicKey(keyPath)
				if err != nil {
					fmt.Fprintln(stderr, "check: --authority-key:", err)
					return exitError{checkFailed}
				}
				keys = protocol.NewKeySet(k)
			}
			rep, err := queue.Check(dir, keys, cmd.Duration("timeout"))
			if err != nil {
				fmt.Fprintln(stderr, "check:", err)
				return exitError{checkFailed}
			}
			if note != "" {
				rep.Notes = append(rep.Notes, note)
			}
			return printCheck(cmd, rep)
		},
	}
}

func authorityCheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "verify a stopped authority's log in full (read-only)",
		Description: "Reads DIR/authority.db (or DIR/authority/authority.db of a `run` or `poc` data directory) without\n" +
			"changing it: both bbolt meta pages, bbolt's page check, the log's identity against DIR/authority.pub, the\n" +
			"last commit recorded in DIR/authority.head, every Group's events (consecutive sequences from the first online\n" +
			"one, each signature by the event key) and the Organization events. Stop the authority first: it holds the\n" +
			"file. Recovery: docs/operations.md, Damaged stores.\n" + checkShape,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the authority's data directory", Required: true, Sources: cli.EnvVars("MWP_AUTHORITY_DATA")},
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"},
			&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the file lock", Value: 2 * time.Second},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			stderr := cmd.Root().ErrWriter
			path, err := authoritylite.FindLog(cmd.String("data"))
			if err != nil {
				fmt.Fprintln(stderr, "authority check:", err)
				return exitError{checkFailed}
			}
			rep, err := authoritylite.Check(path, cmd.Duration("timeout"))
			if err != nil {
				fmt.Fprintln(stderr, "authority check:", err)
				return exitError{checkFailed}
			}
			return printCheck(cmd, rep)
		},
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func printCheck(cmd *cli.Command, rep storecheck.Report) error {
	w := cmd.Root().Writer
	if cmd.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printCheckText(w, rep)
	}
	if !rep.OK {
		return exitError{checkDamaged}
	}
	return nil
}

func printCheckText(w io.Writer, rep storecheck.Report) {
	fmt.Fprintf(w, "%s store %s: %d bytes, page size %d\n", rep.Store, rep.Path, rep.Meta.FileSize, rep.Meta.PageSize)
	for _, p := range rep.Meta.Pages {
		state := "valid"
		if !p.Valid {
			state = "DAMAGED (" + p.Problem + ")"
		}
		used := ""
		if p.Page == rep.Meta.Used {
			used = ", in use"
		}
		fmt.Fprintf(w, "meta page %d: %s, transaction %d%s\n", p.Page, state, p.Txid, used)
	}
	fmt.Fprintf(w, "pages checked: %v; signatures checked: %v\n", rep.StructureChecked, rep.SignaturesChecked)
	for _, g := range rep.Groups {
		state := "ok"
		switch {
		case g.Damaged:
			state = "DAMAGED"
		case g.Diverged != "":
			state = "DIVERGED " + g.Diverged + ": resync it"
		}
		fmt.Fprintf(w, "group %s: %d event(s)", g.GroupID, g.Events)
		if g.Events > 0 {
			fmt.Fprintf(w, " [%d..%d]", g.First, g.Last)
		}
		if g.Cursor != nil {
			fmt.Fprintf(w, ", cursor %d", *g.Cursor)
		}
		fmt.Fprintf(w, ": %s\n", state)
	}
	fmt.Fprintf(w, "organization events: %d\n", rep.OrgEvents)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, p := range rep.Problems {
		where := p.Where
		if p.GroupID != "" {
			where += " " + p.GroupID
		}
		if p.Sequence != 0 {
			where += fmt.Sprintf(" sequence %d", p.Sequence)
		}
		fmt.Fprintf(w, "DAMAGE %s: %s\n", where, p.What)
	}
	if rep.OK {
		fmt.Fprintln(w, "ok: no damage found")
	} else {
		fmt.Fprintf(w, "%d problem(s) found\n", len(rep.Problems))
	}
}
