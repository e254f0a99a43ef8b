package group

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// Every decision in this package's tests also checks that Fold of its
// events gives the state the decision itself wrote: the drift between
// deciding and following that the one Fold exists to prevent.
func init() {
	decidedCheck = func(decided, folded *Group) {
		d, _ := json.Marshal(decided)
		f, _ := json.Marshal(folded)
		if string(d) != string(f) {
			panic(fmt.Sprintf("Fold disagrees with Decide:\n%s", diffJSON(string(f), string(d))))
		}
	}
}

// Outside this package's tests the hook is unset: a decision then neither
// copies the Group nor calls it. Not parallel: it swaps the package's hook
// (parallel tests start only after the sequential ones have run).
func TestDecideWithoutFoldCheck(t *testing.T) {
	saved := decidedCheck
	decidedCheck = nil
	t.Cleanup(func() { decidedCheck = saved })
	k := newKit(t)
	k.authorize("wi")
	k.wantState("wi", protocol.WorkOpen)
}
