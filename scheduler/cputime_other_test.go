//go:build !linux

package scheduler_test

import "time"

var start0 = time.Now()

// threadCPU falls back to wall time where no per-thread CPU clock is read.
func threadCPU() time.Duration { return time.Since(start0) }
