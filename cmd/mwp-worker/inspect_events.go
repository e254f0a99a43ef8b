package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

func inspectEventsCommand() *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "print the events of an authority-lite log (read-only)",
		Description: "Reads DIR/authority.db or DIR/authority/authority.db (the layout `mwp-worker poc --data DIR`\n" +
			"leaves). With --json: one signed event envelope (docs/wire.md) per line, Organization events first,\n" +
			"then each Group's in sequence order. Without: one summary line per event. Every event is verified\n" +
			"against the authority's event key (authority.pub or authority.key beside the log), as `authority\n" +
			"check` does; one that fails is still printed, and the command then exits 1 with one line on stderr\n" +
			"naming how many failed and which. Fails while an authority holds the log. Exit 1 on any problem.",
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
			var keys protocol.KeyResolver
			if pub, err := authoritylite.EventKey(filepath.Dir(path)); err == nil {
				keys = protocol.NewKeySet(pub)
			} else {
				fmt.Fprintln(stderr, "inspect events: signatures not checked:", err)
			}
			w := cmd.Root().Writer
			asJSON := cmd.Bool("json")
			var bad verifyFailures
			err = authoritylite.ReadLog(path, cmd.Duration("timeout"), func(group string, raw []byte) error {
				bad.check(group, raw, keys)
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
			if bad.n > 0 {
				fmt.Fprintln(stderr, "inspect events:", bad.String())
				return exitError{1}
			}
			return nil
		},
	}
}

// verifyFailures counts the printed events that fail verification
// (storecheck.Event, the rule `authority check` applies) and names the
// first few.
type verifyFailures struct {
	n, of int
	names []string
	first error
}

func (f *verifyFailures) check(group string, raw []byte, keys protocol.KeyResolver) {
	f.of++
	_, err := storecheck.Event(raw, keys)
	if err == nil {
		return
	}
	f.n++
	if f.first == nil {
		f.first = err
	}
	if len(f.names) < 5 {
		var ev protocol.Event
		where := group
		if where == "" {
			where = "org"
		}
		name := fmt.Sprintf("%s event %d in the file", where, f.of)
		if json.Unmarshal(raw, &ev) == nil && ev.Seq() > 0 {
			name = fmt.Sprintf("%s %d", where, ev.Seq())
		}
		f.names = append(f.names, name)
	}
}

func (f *verifyFailures) String() string {
	more := ""
	if f.n > len(f.names) {
		more = fmt.Sprintf(" and %d more", f.n-len(f.names))
	}
	return fmt.Sprintf("%d of %d events fail verification (%s%s); the first: %v", f.n, f.of, strings.Join(f.names, ", "), more, f.first)
}
