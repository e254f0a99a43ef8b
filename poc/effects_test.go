package poc

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func featurePatch(t *testing.T) (string, string) {
	t.Helper()
	changed, err := ImplementFeature(TinyProject(), MissionA(base).Feature, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := UnifiedDiff(TinyProject(), changed)
	return p, digestOf(p)
}

func digestOf(s string) string { return protocol.Digest([]byte(s)) }

func TestEffectLogOncePerKey(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenEffectLog(filepath.Join(dir, EffectsFile), nil, TinyProject())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	patch, d := featurePatch(t)
	e1, rep, err := l.Apply("tk1_a", d, patch)
	if err != nil || rep || e1.Seq != 1 {
		t.Fatalf("first apply: %+v %v %v", e1, rep, err)
	}
	e2, rep, err := l.Apply("tk1_a", d, patch)
	if err != nil || !rep || e2.Seq != 1 || e2.Commit != e1.Commit {
		t.Fatalf("repeat: %+v %v %v", e2, rep, err)
	}
	// Another key for a patch already applied: only keys protect the
	// repository, so the patch is tried again, and it no longer applies
	// (it creates a file that exists now): no second effect, no repeat.
	if _, rep, err := l.Apply("tk1_b", d, patch); !errors.Is(err, ErrConflict) || rep {
		t.Fatalf("same patch, other key: %v %v", rep, err)
	}
	// A patch that no longer applies leaves nothing behind.
	bad := strings.Replace(patch, "+++ b/CHANGELOG.md", "+++ b/CHANGELOG.md", 1)
	bad = strings.Replace(bad, "--- /dev/null\n+++ b/calc/clamp.go", "--- /dev/null\n+++ b/calc/other.go", 1)
	if _, _, err := l.Apply("tk1_c", digestOf(bad), bad); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting patch: %v", err)
	}
	if _, _, err := l.Apply("tk1_d", d, patch+"x"); err == nil {
		t.Fatal("a patch that does not match its digest was applied")
	}
	recs, err := l.Records()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs.Effects) != 1 || len(recs.Requests) != 2 || recs.Keys["tk1_a"] != 1 || len(recs.Keys) != 1 {
		t.Fatalf("records %+v", recs)
	}
	repo, _ := l.Repository()
	if _, ok := repo["calc/other.go"]; ok {
		t.Fatal("a refused patch changed the repository")
	}
}

// A power cut after a committed effect (the file copied while the log is
// open) keeps the effect, its key and the repository; reopening does not
// reseed, and the key still answers with the first result.
func TestEffectLogCrashReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, EffectsFile)
	l, err := OpenEffectLog(path, nil, TinyProject())
	if err != nil {
		t.Fatal(err)
	}
	patch, d := featurePatch(t)
	first, _, err := l.Apply("tk1_a", d, patch)
	if err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(dir, "crashed.db")
	copyFile(t, path, crashed)
	l.Close()

	for _, p := range []string{path, crashed} {
		recs, err := ReadEffects(p)
		if err != nil || len(recs.Effects) != 1 || !sameEffect(recs.Effects[0], first) {
			t.Fatalf("%s read-only: %+v %v", p, recs, err)
		}
		r, err := OpenEffectLog(p, nil, Tree{"seed.txt": "must not be written\n"})
		if err != nil {
			t.Fatal(err)
		}
		again, rep, err := r.Apply("tk1_a", d, patch)
		repo, _ := r.Repository()
		r.Close()
		if err != nil || !rep || again.Commit != first.Commit {
			t.Fatalf("%s: repeat after reopen %+v %v %v", p, again, rep, err)
		}
		if _, seeded := repo["seed.txt"]; seeded || repo["calc/clamp.go"] == "" {
			t.Fatalf("%s: repository after reopen %v", p, repo.paths())
		}
	}
	if _, err := ReadEffects(filepath.Join(dir, "none.db")); err == nil {
		t.Fatal("reading a missing log succeeded")
	}
}

func sameEffect(a, b Effect) bool {
	return a.Seq == b.Seq && a.Key == b.Key && a.PatchDigest == b.PatchDigest && a.Commit == b.Commit &&
		a.At == b.At && strings.Join(a.Files, ",") == strings.Join(b.Files, ",")
}
