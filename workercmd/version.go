package workercmd

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"strings"
)

// VersionInfo is what `--version` prints: of mwp-worker, and of a Go
// program on Main.
type VersionInfo struct {
	Version  string // module version: a tag, a pseudo-version, or (devel)
	Revision string // VCS commit, "" when unknown
	Time     string // commit time, RFC 3339
	Modified bool   // built from a work tree with uncommitted changes
	Go       string // toolchain
	Platform string // GOOS/GOARCH
}

// ReadVersion is the binary's version from its build info; stamped and
// stampedRevision, set by a release build's -ldflags -X, win over it.
func ReadVersion(stamped, stampedRevision string) VersionInfo {
	v := VersionInfo{Version: "(devel)", Go: goruntime.Version(), Platform: goruntime.GOOS + "/" + goruntime.GOARCH}
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
	if stamped != "" {
		v.Version = stamped
	}
	if stampedRevision != "" && stampedRevision != v.Revision {
		// The stamped commit is not the one the build info describes.
		v.Revision, v.Time, v.Modified = stampedRevision, "", false
	}
	return v
}

// String is one line: "v0.1.0 (revision 8ffda48…, 2026-12-01T23:00:00Z,
// modified; go1.26.8 linux/amd64)".
func (v VersionInfo) String() string {
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
