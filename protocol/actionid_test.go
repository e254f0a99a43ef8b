package protocol_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// TestNewActionIDOrdered checks the shape of fresh action ids and that
// ids issued later sort later, so one sender's receipts append to the end
// of its key range in the authority's store.
func TestNewActionIDOrdered(t *testing.T) {
	shape := regexp.MustCompile(`^act-[0-9a-f]{24}$`)
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	var ids []string
	seen := map[string]bool{}
	for i := range 2000 {
		id := protocol.NewActionID(t0.Add(time.Duration(i/4) * time.Millisecond))
		if !shape.MatchString(id) {
			t.Fatalf("id %q does not match %s", id, shape)
		}
		if seen[id] {
			t.Fatalf("id %q issued twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	for i := 4; i < len(ids); i += 4 {
		// Within a millisecond the order is random; across them it follows time.
		if ids[i-1][:16] >= ids[i][:16] {
			t.Fatalf("%q (ms %d) does not sort before %q (ms %d)", ids[i-1], i/4-1, ids[i], i/4)
		}
	}
}
