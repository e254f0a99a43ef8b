package grouptest

import (
	"testing"

	"pgregory.net/rapid"
)

// RapidTB lets a test kit written for testing.TB report through a
// *rapid.T inside rapid.Check, so a failure shrinks instead of aborting.
type RapidTB struct {
	*testing.T
	RT *rapid.T
}

func (r RapidTB) Helper()                           {}
func (r RapidTB) Fatal(args ...any)                 { r.RT.Fatal(args...) }
func (r RapidTB) Fatalf(format string, args ...any) { r.RT.Fatalf(format, args...) }
