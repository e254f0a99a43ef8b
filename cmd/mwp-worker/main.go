// Command mwp-worker is the MissionWeaveProtocol 0.1 worker: the daemon, its
// embedded Group Authority, the proof of concept and the operator tools.
// Each subcommand lives in its own file; usage errors and the version are
// handled here, for all of them alike (usage.go, version.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/workercmd"
)

// exitError carries a process exit code without printing anything more
// (workercmd.ExitError is the same for the run command and the helpers
// it shares; run below reads both).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitUsage is the exit status of a command line that cannot run: an
// unknown flag or command, a bad flag value, a missing required flag or
// argument.
const exitUsage = workercmd.ExitUsage

func newApp() *cli.Command {
	app := &cli.Command{
		Name:    "mwp-worker",
		Usage:   "MissionWeaveProtocol 0.1 worker, Group Authority (lite) and protocol tools",
		Version: buildVersion().String(),
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
			checkCommand(),
			compactCommand(),
			toolkeyCommand(),
			authorityCommand(),
			missionCommand(),
			coordinatorCommand(),
			runCommand(),
			upCommand(),
			pocCommand(),
			benchCommand(),
			versionCommand(),
			helpCommand(),
		},
		// Our own help command (helpCommand) reports unknown topics as
		// usage errors; the library's answers "No help topic" with exit 3.
		HideHelpCommand: true,
		ArgValidator:    checkArgs,
		// Errors come back to run, which prints them once; the default
		// handler prints cli.Exit errors itself and calls os.Exit.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
	}
	setUsageErrors(app, "mwp-worker")
	return app
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
	var we workercmd.ExitError
	if errors.As(err, &we) {
		return we.Code
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %v; see %s --help\n", ue.command, ue.err, ue.command)
		return exitUsage
	}
	fmt.Fprintln(stderr, "mwp-worker:", err)
	var ec cli.ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() != 0 {
		return ec.ExitCode()
	}
	return 1
}
