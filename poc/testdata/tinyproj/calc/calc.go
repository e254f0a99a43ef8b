// Package calc is the tiny project the PoC missions change.
package calc

// Add returns a + b.
func Add(a, b int) int {
	return a + b
}
