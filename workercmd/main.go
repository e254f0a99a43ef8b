package workercmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/slots"
)

// ExitUsage is the exit status of a command line that cannot run, as for
// every mwp-worker command (docs/operations.md).
const ExitUsage = 2

// Main is `mwp-worker run` as a program of its own, with handlers besides
// any of --handler-exec: every flag and environment variable of run
// (docs/configuration.md), its signals (the first drains, a second kills
// every handler process group and exits 130) and its logging. It exits the
// process with run's status (docs/operations.md).
func Main(handlers ...slots.Handler) {
	os.Exit(Run(context.Background(), os.Args, os.Stdout, os.Stderr, handlers...))
}

// Run is Main returning the exit status instead of exiting.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, handlers ...slots.Handler) int {
	name := "worker"
	if len(args) > 0 {
		name = filepath.Base(args[0])
	}
	cmd := Command(Options{Handlers: handlers})
	cmd.Name, cmd.Writer, cmd.ErrWriter = name, stdout, stderr
	// Errors come back here and are printed once, as one line.
	cmd.ExitErrHandler = func(context.Context, *cli.Command, error) {}
	cmd.OnUsageError = func(_ context.Context, _ *cli.Command, err error, _ bool) error { return err }
	action := cmd.Action
	cmd.Action = func(ctx context.Context, c *cli.Command) error {
		if c.NArg() > 0 {
			return fmt.Errorf("takes no arguments, got %q", c.Args().First())
		}
		return action(ctx, c)
	}
	err := cmd.Run(ctx, args)
	var ee ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	fmt.Fprintf(stderr, "%s: %v; see %s --help\n", name, err, name)
	return ExitUsage
}
