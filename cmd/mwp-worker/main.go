// Command mwp-worker is the MissionWeaveProtocol 0.1 worker: the daemon, its
// embedded Group Authority, the proof of concept and the operator tools.
// Each subcommand lives in its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v3"
)

// exitError carries a process exit code without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newApp() *cli.Command {
	return &cli.Command{
		Name:  "mwp-worker",
		Usage: "MissionWeaveProtocol 0.1 worker, Group Authority (lite) and protocol tools",
		Commands: []*cli.Command{
			validateCommand(),
			planCommand(),
			canonCommand(),
			digestCommand(),
			keygenCommand(), signCommand(), verifyCommand(),
			schedulerCommand(),
			inspectCommand(),
			resyncCommand(),
			statusCommand(),
			toolkeyCommand(),
			authorityCommand(),
			runCommand(),
			pocCommand(),
		},
	}
}

func main() {
	os.Exit(run(context.Background(), os.Args, os.Stdout, os.Stderr))
}

// run executes the CLI with the given output streams and returns the exit
// code; tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp()
	app.Writer, app.ErrWriter = stdout, stderr
	err := app.Run(ctx, args)
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(stderr, "mwp-worker:", err)
	return 1
}
