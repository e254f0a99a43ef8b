package main

import (
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
)

// releaseBuild runs .ci/release-build (CGO_ENABLED=0, -trimpath, the
// version stamp) with env added, and returns the binary.
func releaseBuild(t *testing.T, env ...string) string {
	t.Helper()
	goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go toolchain to build the binary")
		}
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash to run .ci/release-build")
	}
	bin := filepath.Join(t.TempDir(), "mwp-worker")
	cmd := exec.Command("bash", filepath.Join("..", "..", ".ci", "release-build"), bin)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(goBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf(".ci/release-build: %v\n%s", err, out)
	}
	return bin
}

func versionOf(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
	return string(out)
}

// The release binary says which commit it is, with -trimpath and without
// cgo, whether the stamp comes from the environment (a container build) or
// from git.
func TestReleaseBuildVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Run("stamped", func(t *testing.T) {
		const rev = "0123456789abcdef0123456789abcdef01234567"
		bin := releaseBuild(t, "VERSION=v9.8.7-test", "REVISION="+rev)
		want := "mwp-worker version v9.8.7-test (revision " + rev
		for _, args := range [][]string{{"--version"}, {"version"}} {
			if out := versionOf(t, bin, args...); !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
				t.Errorf("%v: %q, want it to start with %q", args, out, want)
			}
		}
		info, err := exec.Command(filepath.Join(goruntime.GOROOT(), "bin", "go"), "version", "-m", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"-trimpath=true", "CGO_ENABLED=0"} {
			if !strings.Contains(string(info), want) {
				t.Errorf("go version -m lacks %s:\n%s", want, info)
			}
		}
	})
	t.Run("from git", func(t *testing.T) {
		head, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			t.Skipf("no git work tree here (%v)", err)
		}
		bin := releaseBuild(t)
		rev := strings.TrimSpace(string(head))
		if out := versionOf(t, bin, "--version"); !strings.Contains(out, "(revision "+rev) {
			t.Errorf("--version: %q, want revision %s", out, rev)
		}
	})
}
