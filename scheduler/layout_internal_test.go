package scheduler

import (
	"testing"
	"unsafe"
)

// An entry of 256 bytes starts on a cache line (its size class is a
// multiple of 64) and spans 4 lines; a few bytes more make it 288 bytes,
// and every other entry then straddles 5.
func TestEntryIs256Bytes(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 256 {
		t.Fatalf("entry is %d bytes, want 256", n)
	}
}

// Two heap nodes fill one cache line.
func TestNodeIs32Bytes(t *testing.T) {
	if n := unsafe.Sizeof(node{}); n != 32 {
		t.Fatalf("node is %d bytes, want 32", n)
	}
}
