package runtime

import "sync/atomic"

// TestHooks switch one behaviour of every Worker in the process off, so
// that a test can prove a check fails without it (the PoC's fault suite:
// each fault's check must fail when what it shows did not happen). Only
// tests set them; no flag or configuration reaches them. All hooks live
// here.
var TestHooks struct {
	// NoResume starts every run from scratch: work.start never names the
	// item's checkpoint, so nothing resumes from one.
	NoResume atomic.Bool
}
