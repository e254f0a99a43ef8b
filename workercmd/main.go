package workercmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

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
// process with run's status (docs/operations.md). `PROGRAM up PLAN` is
// `mwp-worker up` with the same handlers (one plan end to end in one
// process; without --auto-approve it prints what awaits approval and
// waits), and `PROGRAM --version` prints the program's version.
func Main(handlers ...slots.Handler) {
	os.Exit(Run(context.Background(), os.Args, os.Stdout, os.Stderr, handlers...))
}

// Run is Main returning the exit status instead of exiting.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, handlers ...slots.Handler) int {
	name := "worker"
	if len(args) > 0 {
		name = filepath.Base(args[0])
	}
	cmd := Command(Options{Handlers: handlers, ownProcess: true})
	cmd.Name, cmd.Writer, cmd.ErrWriter = name, stdout, stderr
	cmd.Version = ReadVersion("", "").String()
	up := UpCommand(Options{Handlers: handlers, ownProcess: true})
	up.OnUsageError = func(_ context.Context, _ *cli.Command, err error, _ bool) error { return err }
	cmd.Commands = []*cli.Command{up}
	// Errors come back here and are printed once, as one line.
	cmd.ExitErrHandler = func(context.Context, *cli.Command, error) {}
	cmd.OnUsageError = func(_ context.Context, _ *cli.Command, err error, _ bool) error { return err }
	// run's required flags are checked by its action: the library checks
	// a parent's required flags for its subcommands too, and up has none.
	var required []string
	for _, f := range cmd.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Required {
			sf.Required, required = false, append(required, sf.Name)
		}
	}
	action := cmd.Action
	cmd.Action = func(ctx context.Context, c *cli.Command) error {
		if c.NArg() > 0 {
			return fmt.Errorf("takes no arguments, got %q", c.Args().First())
		}
		var missing []string
		for _, name := range required {
			if !c.IsSet(name) {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("required flag %s not set", strings.Join(missing, ", "))
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
