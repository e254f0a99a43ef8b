package runtime

import (
	"testing"

	lc "github.com/missionweave/mwp-worker/runtime/item"
	"github.com/missionweave/mwp-worker/slots"
)

// The engine hands a slot's outcome to lc.Step as lc.End(kind): the two
// enumerations must name the same ends with the same values.
func TestOutcomeKindsAreLifecycleEnds(t *testing.T) {
	for k := slots.Completed; k <= slots.LeaseLost; k++ {
		if got := lc.End(k).String(); got != k.String() {
			t.Errorf("slots %s is lc %s", k, got)
		}
	}
	if lc.End(slots.LeaseLost+1).String() != "unknown" {
		t.Error("lc has an end slots does not")
	}
}
