package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v3"
)

// Set by the release build (.ci/release-build) with
// -ldflags "-X main.version=V -X main.revision=COMMIT", for builds where the
// go command cannot stamp the VCS state itself (a container build without
// .git, -buildvcs=false). They win over what the binary's build info says.
var version, revision string

// versionInfo is what `mwp-worker --version` prints.
type versionInfo struct {
	Version  string // module version: a tag, a pseudo-version, or (devel)
	Revision string // VCS commit, "" when unknown
	Time     string // commit time, RFC 3339
	Modified bool   // built from a work tree with uncommitted changes
	Go       string // toolchain
	Platform string // GOOS/GOARCH
}

func buildVersion() versionInfo {
	v := versionInfo{Version: "(devel)", Go: goruntime.Version(), Platform: goruntime.GOOS + "/" + goruntime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		v.Version = version
	}
	if revision != "" && revision != v.Revision {
		// The stamped commit is not the one the build info describes.
		v.Revision, v.Time, v.Modified = revision, "", false
	}
	return v
}

// String is one line: "v0.1.0 (revision 8ffda48…, 2026-12-01T23:00:00Z,
// modified; go1.26.8 linux/amd64)".
func (v versionInfo) String() string {
	rev := []string{"revision unknown"}
	if v.Revision != "" {
		rev[0] = "revision " + v.Revision
	}
	if v.Time != "" {
		rev = append(rev, v.Time)
	}
	if v.Modified {
		rev = append(rev, "modified")
	}
	return fmt.Sprintf("%s (%s; %s %s)", v.Version, strings.Join(rev, ", "), v.Go, v.Platform)
}

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
