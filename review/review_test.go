package review

import (
	"strings"
	"testing"
)

// Load folds every event it is given and names the one that does not
// fold by the sequence it follows, whatever the events' type.
func TestLoadNamesTheEventThatDoesNotFold(t *testing.T) {
	type stored struct{ raw []byte }
	v, err := Load("grp-a", []stored{{[]byte("{")}}, func(e stored) []byte { return e.raw })
	if err == nil || !strings.HasPrefix(err.Error(), "review: the event after 0 of grp-a: ") {
		t.Fatalf("a log whose first event is not JSON: %v", err)
	}
	if v.Last() != 0 || v.GroupID() != "grp-a" {
		t.Fatalf("view of %s at %d", v.GroupID(), v.Last())
	}
	if _, err := Load("grp-a", [][]byte{}, func(b []byte) []byte { return b }); err != nil {
		t.Fatalf("an empty log: %v", err)
	}
}
