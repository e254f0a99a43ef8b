package poc

// TinyProject returns the baseline of the tiny Go project the missions
// change (module example.com/tinyproj). It mirrors poc/testdata/tinyproj,
// which has its own go.mod and so cannot be embedded; a test keeps the two
// identical.
func TinyProject() Tree {
	return Tree{
		"CHANGELOG.md": `# Changelog

## Unreleased

- calc: Add returns the sum of two integers.
`,
		"calc/calc.go": `// Package calc is the tiny project the PoC missions change.
package calc

// Add returns a + b.
func Add(a, b int) int {
	return a + b
}
`,
		"calc/calc_test.go": `package calc

import "testing"

func TestAdd(t *testing.T) {
	for _, c := range []struct{ a, b, want int }{{1, 2, 3}, {-1, 1, 0}, {0, 0, 0}} {
		if got := Add(c.a, c.b); got != c.want {
			t.Errorf("Add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
`,
		"go.mod": `module example.com/tinyproj

go 1.26
`,
	}
}
