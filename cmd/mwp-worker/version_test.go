package main

import (
	"errors"
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
	bin, out, err := runReleaseBuild(t, filepath.Join("..", ".."), env...)
	if err != nil {
		t.Fatalf(".ci/release-build: %v\n%s", err, out)
	}
	return bin
}

// runReleaseBuild runs repo/.ci/release-build.
func runReleaseBuild(t *testing.T, repo string, env ...string) (bin string, out []byte, err error) {
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
	bin = filepath.Join(t.TempDir(), "mwp-worker")
	cmd := exec.Command("bash", filepath.Join(repo, ".ci", "release-build"), bin)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(goBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	out, err = cmd.CombinedOutput()
	return bin, out, err
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
	t.Run("without git", func(t *testing.T) {
		// As in the container build: the sources without .git.
		files, err := exec.Command("git", "-C", filepath.Join("..", ".."), "ls-files", "-co", "--exclude-standard").Output()
		if err != nil {
			t.Skipf("no git to list the sources (%v)", err)
		}
		repo := t.TempDir()
		for _, f := range strings.Split(strings.TrimSpace(string(files)), "\n") {
			b, err := os.ReadFile(filepath.Join("..", "..", f))
			if errors.Is(err, os.ErrNotExist) {
				continue // deleted in the work tree
			} else if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(repo, f)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if _, out, err := runReleaseBuild(t, repo); err == nil || !strings.Contains(string(out), "set REVISION") {
			t.Errorf("without git and REVISION: %v\n%s", err, out)
		}
		const rev = "fedcba9876543210fedcba9876543210fedcba98"
		bin, out, err := runReleaseBuild(t, repo, "VERSION=v1.0.0-nogit", "REVISION="+rev)
		if err != nil {
			t.Fatalf(".ci/release-build: %v\n%s", err, out)
		}
		if out := versionOf(t, bin, "--version"); !strings.HasPrefix(out, "mwp-worker version v1.0.0-nogit (revision "+rev+"; ") {
			t.Errorf("--version: %q", out)
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
