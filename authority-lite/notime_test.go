package authoritylite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoWallClock keeps the decision core pure: time only arrives as the
// now argument (STYLE.md, "a pure core that hands I/O back").
func TestNoWallClock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	// Split so this file does not match itself.
	banned := []string{"time." + "Now(", "time." + "Since(", "time." + "Until(", "time." + "Sleep(", "time." + "After(", "time." + "Tick("}
	for _, f := range files {
		// Tests may wait for goroutines with a deadline; production code,
		// the service layer included, reads only its injected clock.
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range banned {
			// writer.go may back off briefly when taking an ancestor's
			// lock against the usual order; that wait decides nothing.
			if f == "writer.go" && b == "time."+"Sleep(" {
				continue
			}
			if strings.Contains(string(src), b) {
				t.Errorf("%s uses %s: take the time as an argument", f, b)
			}
		}
	}
	if len(files) < 5 {
		t.Fatalf("found only %d Go files; is the test running in the package directory?", len(files))
	}
}
