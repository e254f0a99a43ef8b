package protocol

import "testing"

// Every Command type this implementation defines has exactly one row, and
// every row has a payload type.
func TestCommandsTableIsComplete(t *testing.T) {
	for typ, r := range Commands {
		if r.Payload == nil || PayloadFor(typ) == nil {
			t.Errorf("%s has a rule but no payload type", typ)
		}
		if r.Scope == "" || r.CoordinatorEpoch == "" || r.Sender == "" {
			t.Errorf("%s: incomplete rule %+v", typ, r)
		}
		if (r.Scope == ScopeOrganization) != (r.Aggregate == "") {
			t.Errorf("%s: scope %s with aggregate %q", typ, r.Scope, r.Aggregate)
		}
		if r.CoordinatorEpoch == EpochRequired && r.Sender != SenderCoordinator {
			t.Errorf("%s: only the coordinator lease authorizes it, but its sender is %s", typ, r.Sender)
		}
	}
	n := 0
	for _, typ := range allCommandTypes() {
		if _, ok := Commands[typ]; !ok {
			t.Errorf("%s has no rule", typ)
		}
		n++
	}
	if n != len(Commands) {
		t.Errorf("%d command types, %d rules", n, len(Commands))
	}
}
