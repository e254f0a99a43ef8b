package poc

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestPatchRoundTrip(t *testing.T) {
	old := Tree{"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "b.txt": "x\n", "gone.txt": "bye\n"}
	cases := []struct {
		name string
		edit func(Tree)
	}{
		{"change middle", func(t Tree) { t["a.txt"] = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n" }},
		{"change first", func(t Tree) { t["a.txt"] = "one\n2\n3\n4\n5\n6\n7\n8\n9\n" }},
		{"append", func(t Tree) { t["a.txt"] += "10\n11\n" }},
		{"insert only", func(t Tree) { t["a.txt"] = "1\n2\n3\nnew\n4\n5\n6\n7\n8\n9\n" }},
		{"remove lines", func(t Tree) { t["a.txt"] = "1\n2\n8\n9\n" }},
		{"create", func(t Tree) { t["dir/c.go"] = "package c\n" }},
		{"delete", func(t Tree) { delete(t, "gone.txt") }},
		{"empty a file", func(t Tree) { t["b.txt"] = "" }},
		{"everything", func(t Tree) { t["b.txt"] = "y\nz\n"; delete(t, "gone.txt"); t["n.txt"] = "n\n" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := old.Clone()
			c.edit(want)
			patch := UnifiedDiff(old, want)
			got, changes, err := ApplyPatch(old, patch)
			if err != nil {
				t.Fatalf("%v\n%s", err, patch)
			}
			if len(changes) == 0 {
				t.Fatal("no changes listed")
			}
			for p := range want {
				if got[p] != want[p] {
					t.Fatalf("%s: got %q want %q\n%s", p, got[p], want[p], patch)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("files %v, want %v", got.paths(), want.paths())
			}
			if old["a.txt"] != "1\n2\n3\n4\n5\n6\n7\n8\n9\n" {
				t.Fatal("ApplyPatch changed its input")
			}
		})
	}
	if UnifiedDiff(old, old) != "" {
		t.Fatal("diff of equal trees is not empty")
	}
}

func TestApplyPatchRefuses(t *testing.T) {
	base := Tree{"a.txt": "1\n2\n3\n"}
	cases := map[string]string{
		"context mismatch": "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n 1\n-9\n+x\n",
		"create existing":  "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1,1 @@\n+x\n",
		"missing file":     "--- a/b.txt\n+++ b/b.txt\n@@ -1,1 +1,1 @@\n-1\n+2\n",
		"dotdot":           "--- /dev/null\n+++ b/../etc/passwd\n@@ -0,0 +1,1 @@\n+x\n",
		"absolute":         "--- /dev/null\n+++ b//etc/passwd\n@@ -0,0 +1,1 @@\n+x\n",
		"no prefix":        "--- /dev/null\n+++ x.txt\n@@ -0,0 +1,1 @@\n+x\n",
		"rename":           "--- a/a.txt\n+++ b/c.txt\n@@ -1,1 +1,1 @@\n-1\n+2\n",
		"short hunk":       "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n-1\n+2\n",
		"bad header":       "--- a/a.txt\n+++ b/a.txt\n@@ nonsense @@\n",
		"no hunk":          "--- a/a.txt\n+++ b/a.txt\n",
		"garbage":          "hello\n",
		"empty":            "",
		"past the end":     "--- a/a.txt\n+++ b/a.txt\n@@ -9,1 +9,1 @@\n-1\n+2\n",
		"partial delete":   "--- a/a.txt\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-1\n",
	}
	for name, p := range cases {
		if _, _, err := ApplyPatch(base, p); err == nil {
			t.Errorf("%s: applied", name)
		}
	}
}

// Any edit of any tree round-trips through UnifiedDiff and ApplyPatch.
func TestPatchRoundTripProperty(t *testing.T) {
	line := rapid.StringMatching(`[a-c]{0,3}`)
	file := rapid.Map(rapid.SliceOfN(line, 0, 12), func(ls []string) string {
		if len(ls) == 0 {
			return ""
		}
		return strings.Join(ls, "\n") + "\n"
	})
	tree := rapid.MapOfN(rapid.SampledFrom([]string{"a", "b", "d/c", "d/e"}), file, 0, 4)
	rapid.Check(t, func(t *rapid.T) {
		old, want := Tree(tree.Draw(t, "old")), Tree(tree.Draw(t, "new"))
		got, _, err := ApplyPatch(old, UnifiedDiff(old, want))
		if UnifiedDiff(old, want) == "" {
			return // nothing to apply; ApplyPatch refuses an empty patch
		}
		if err != nil {
			t.Fatalf("%v\n%s", err, UnifiedDiff(old, want))
		}
		for p := range want {
			if got[p] != want[p] {
				t.Fatalf("%s: got %q want %q", p, got[p], want[p])
			}
		}
		if len(got) != len(want) {
			t.Fatalf("files %v, want %v", got.paths(), want.paths())
		}
	})
}

// Patches are outside input (artifacts of other agents): no input may
// panic, and an accepted patch never escapes the tree.
func FuzzApplyPatch(f *testing.F) {
	base := TinyProject()
	changed, _ := ImplementFeature(base, MissionA(time.Time{}).Feature, []string{"more"})
	f.Add(UnifiedDiff(base, changed))
	f.Add("--- /dev/null\n+++ b/x\n@@ -0,0 +1,1 @@\n+x\n")
	f.Add("--- a/go.mod\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-module example.com/tinyproj\n-\n-go 1.26\n")
	f.Fuzz(func(t *testing.T, patch string) {
		out, changes, err := ApplyPatch(base, patch)
		if err != nil {
			return
		}
		for _, c := range changes {
			if strings.HasPrefix(c.Path, "/") || strings.Contains("/"+c.Path+"/", "/../") {
				t.Fatalf("unsafe path %q accepted", c.Path)
			}
		}
		if base["go.mod"] == "" || out == nil {
			t.Fatal("input tree changed or no output")
		}
	})
}

// Feature requests and requirements notes are outside input too.
func FuzzDecodeFeature(f *testing.F) {
	f.Add(FeatureRequest(MissionA(time.Time{}).Feature))
	note, _ := RequirementsNote(MissionB(time.Time{}).Feature, "x")
	f.Add(note)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, dec := range []func([]byte) (Feature, error){DecodeFeature, FeatureFromNote} {
			feat, err := dec(raw)
			if err != nil {
				continue
			}
			if _, _, err := RenderFeature(feat); err != nil && !strings.Contains(err.Error(), "parse") {
				t.Fatalf("a validated feature does not render: %v", err)
			}
		}
	})
}
