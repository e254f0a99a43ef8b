package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/workercmd"
)

// Set by the release build (.ci/release-build) with
// -ldflags "-X main.version=V -X main.revision=COMMIT", for builds where the
// go command cannot stamp the VCS state itself (a container build without
// .git, -buildvcs=false). They win over what the binary's build info says.
var version, revision string

// versionInfo is what `mwp-worker --version` prints (workercmd's, which
// a Go program on workercmd.Main prints too).
type versionInfo = workercmd.VersionInfo

func buildVersion() versionInfo { return workercmd.ReadVersion(version, revision) }

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, VCS revision and Go toolchain of this binary (the same as --version)",
		Action: func(_ context.Context, cmd *cli.Command) error {
			root := cmd.Root()
			_, err := fmt.Fprintf(root.Writer, "%s version %s\n", root.Name, root.Version)
			return err
		},
	}
}
