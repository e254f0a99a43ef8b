package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/toolkeys"
	"github.com/urfave/cli/v3"
)

func toolkeyCommand() *cli.Command {
	return &cli.Command{
		Name:  "toolkey",
		Usage: "print the idempotency key of an external tool operation (spec 16)",
		Description: "Prints \"tk1_\" + base64url(sha256(JCS([mission, work item, epoch, op]))) without padding, and a\n" +
			"newline: the key a worker hands to an external service for that operation, the same in every\n" +
			"process and language. With --attempt N it prints the key of the N-th attempt instead (key + \".N\").\n" +
			"Ids must be non-empty UTF-8; --epoch is a decimal integer from 0 to 2^53-1, --attempt from 1 to\n" +
			"2^53-1. A bad value: one line on stderr and exit status 1; a bad flag or argument: exit status 2.\n" +
			"(No MWP_* variables: a key computed from a stray environment variable would be silently wrong.)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "mission", Usage: "Mission id", Required: true},
			&cli.StringFlag{Name: "work-item", Usage: "WorkItem id", Required: true},
			&cli.StringFlag{Name: "epoch", Usage: "ownership epoch of the WorkItem", Required: true},
			&cli.StringFlag{Name: "op", Usage: "logical operation id, e.g. git.push", Required: true},
			&cli.StringFlag{Name: "attempt", Usage: "print the key of this attempt (1-based)"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			errOut := cmd.Root().ErrWriter
			fail := func(format string, args ...any) error {
				fmt.Fprintf(errOut, "mwp-worker toolkey: "+format+"\n", args...)
				return exitError{1}
			}
			if cmd.NArg() != 0 {
				return fail("takes no arguments, got %q", cmd.Args().First())
			}
			epoch, err := parseSafeUint(cmd.String("epoch"))
			if err != nil {
				return fail("--epoch: %v", err)
			}
			key, err := toolkeys.Key(toolkeys.Op{
				MissionID:      cmd.String("mission"),
				WorkItemID:     cmd.String("work-item"),
				OwnershipEpoch: epoch,
				OperationID:    cmd.String("op"),
			})
			if err != nil {
				return fail("%v", err)
			}
			if cmd.IsSet("attempt") {
				n, err := parseSafeUint(cmd.String("attempt"))
				if err == nil && n == 0 {
					err = fmt.Errorf("attempts count from 1")
				}
				if err != nil {
					return fail("--attempt: %v", err)
				}
				key = toolkeys.AttemptKey(key, n)
			}
			_, err = fmt.Fprintln(cmd.Root().Writer, key)
			return err
		},
	}
}

// parseSafeUint reads a decimal integer in [0, 2^53-1]: digits only, no
// sign, no spaces, no other base.
func parseSafeUint(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > protocol.MaxSafeInteger {
		return 0, fmt.Errorf("%q is not an integer from 0 to 2^53-1", s)
	}
	return n, nil
}
