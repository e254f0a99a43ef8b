package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"time"

	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/internal/ops"
	"github.com/missionweave/mwp-worker/protocol"
)

// authoritySocket is where a running `authority serve` answers inspect.
const authoritySocket = "authority.sock"

func authorityInspectCommand() *cli.Command {
	return &cli.Command{
		Name:  "inspect",
		Usage: "show a running authority's Groups (Mission, log head, items by state) and agents' sessions",
		Description: "Asks the `authority serve` running on DIR over DIR/" + authoritySocket + "; it reads nothing from the\n" +
			"log file, which the running authority holds. --json prints the status object (docs/shapes.md).\n" +
			"Exit 1 when no authority runs there.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the authority's data directory", Required: true, Sources: cli.EnvVars("MWP_AUTHORITY_DATA")},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the authority's answer", Value: 2 * time.Second},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var st authoritylite.Status
			path := filepath.Join(cmd.String("data"), authoritySocket)
			if err := ops.AskStatus(path, cmd.Duration("timeout"), &st); err != nil {
				fmt.Fprintf(cmd.Root().ErrWriter, "authority inspect: no running authority answers on %s: %v\n", path, err)
				return exitError{1}
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printAuthorityStatus(w, st)
			return nil
		},
	}
}

func printAuthorityStatus(w io.Writer, st authoritylite.Status) {
	state := "log writable"
	if !st.Writable {
		state = "LOG NOT WRITABLE: " + st.Err
	}
	fmt.Fprintf(w, "authority %s (event key %s) in %s: %s\n", st.ID, st.EventKey, st.Dir, state)
	fmt.Fprintf(w, "%d Group(s), %d agent(s)\n", len(st.Groups), len(st.Agents))
	for _, g := range st.Groups {
		line := fmt.Sprintf("group %s: mission %s %s, %d events, %d members", g.GroupID, orDash(g.MissionID), orDash(string(g.MissionState)), g.LastSequence, g.Members)
		states := make([]string, 0, len(g.Items))
		for s := range g.Items {
			states = append(states, string(s))
		}
		sort.Strings(states)
		for i, s := range states {
			sep := ", items "
			if i > 0 {
				sep = " "
			}
			line += fmt.Sprintf("%s%s=%d", sep, s, g.Items[protocol.WorkItemState(s)])
		}
		if g.Archived {
			line += ", archived"
		}
		fmt.Fprintln(w, line)
	}
	for _, a := range st.Agents {
		fmt.Fprintf(w, "agent %s: session %d\n", a.AgentID, a.SessionEpoch)
	}
}
