package group

import (
	"encoding/json"
	"fmt"
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
