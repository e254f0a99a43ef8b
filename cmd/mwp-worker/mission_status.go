package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/review"
)

// The status and review `mission status` prints are package review's.
type missionStatus = review.Status

// loadView folds every event of v's Group after the view's last.
func loadView(ctx context.Context, v *review.View, a *remote.Authority) error {
	evs, err := a.Events(ctx, v.GroupID(), v.Last(), 0)
	if err != nil {
		return err
	}
	return review.Fold(v, evs, func(e remote.SignedEvent) []byte { return e.Raw })
}

// The watch's back-off after a lost connection or a retryable answer.
const (
	watchRetryFrom = 250 * time.Millisecond
	watchRetryMax  = 10 * time.Second
)

// watchRetryable reports whether the watch waits an error out: the
// authority's retryable codes, and a request that got no answer (the
// connection: *url.Error from the HTTP client). Anything else, a bad event
// or a refusal, ends the watch.
func watchRetryable(err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code.Retryable()
	}
	var ue *url.Error
	return errors.As(err, &ue)
}

func missionStatusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a Mission's stages: states, owners and estimated completion",
		ArgsUsage: "MISSION",
		Description: "Finds MISSION's Group with GET /mwp/missions/MISSION (members only), reads the Group's log\n" +
			"(every event verified with --authority-key) and prints the Mission and one line per WorkItem:\n" +
			"its state, owner and ETA (the owner's schedule disclosure or latest revised estimate). With\n" +
			"--watch it follows the log until the Mission is approved, cancelled or terminated: on a\n" +
			"terminal the display is redrawn, otherwise one line is appended per change. --json prints the\n" +
			"status object (docs/shapes.md), one per line and per change with --watch.",
		Flags: append(requiring(authorityFlags(), "authority-key"),
			&cli.BoolFlag{Name: "watch", Usage: "follow the Mission until it ends"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON objects, one per line"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			a, _, err := dialHuman(ctx, cmd, true)
			if err != nil {
				return failOrUsage(cmd, err)
			}
			g, err := a.MissionGroup(ctx, cmd.Args().First())
			if err != nil {
				return refusal(cmd, err)
			}
			v := review.NewView(g)
			if err := loadView(ctx, v, a); err != nil {
				return refusal(cmd, err)
			}
			out := cmd.Root().Writer
			f, isFile := out.(*os.File)
			redraw := cmd.Bool("watch") && !cmd.Bool("json") && isFile && isTerminal(f)
			show := func(prev *missionStatus, s missionStatus) error {
				switch {
				case cmd.Bool("json"):
					b, err := json.Marshal(s)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "%s\n", b)
				case redraw:
					fmt.Fprint(out, "\x1b[H\x1b[2J")
					s.Render(out)
				case prev == nil:
					s.Render(out)
				default:
					for _, l := range review.Changes(*prev, s) {
						fmt.Fprintln(out, l)
					}
				}
				if !cmd.Bool("json") && s.State == protocol.MissionAwaitingApproval && (prev == nil || redraw || prev.State != s.State) {
					v.RenderReview(ctx, out, s, a.Artifact)
					review.DecideLines(out, s.MissionID, cmd.String("owner-key"))
				}
				return nil
			}
			s := v.Status()
			if err := show(nil, s); err != nil {
				return err
			}
			backoff := watchRetryFrom
			for cmd.Bool("watch") && !s.State.Terminal() {
				err := a.Wait(ctx, g, v.Last())
				if err == nil {
					err = loadView(ctx, v, a)
				}
				if err != nil {
					// A lost connection or a retryable answer (RATE_LIMITED,
					// INTERNAL_ERROR) is waited out, the wait doubling; a
					// refusal ends the watch.
					if ctx.Err() != nil || !watchRetryable(err) {
						return refusal(cmd, err)
					}
					fmt.Fprintf(cmd.Root().ErrWriter, "%s: %s; trying again in %s\n", cmd.FullName(), oneLine(err.Error()), backoff)
					select {
					case <-time.After(backoff):
					case <-ctx.Done():
						return refusal(cmd, ctx.Err())
					}
					backoff = min(2*backoff, watchRetryMax)
					continue
				}
				backoff = watchRetryFrom
				next := v.Status()
				if err := show(&s, next); err != nil {
					return err
				}
				s = next
			}
			return nil
		},
	}
}

// requiring marks the flag name of flags required: commands that read
// events need --authority-key, which the other mission commands do not.
func requiring(flags []cli.Flag, name string) []cli.Flag {
	for _, f := range flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == name {
			sf.Required = true
		}
	}
	return flags
}
