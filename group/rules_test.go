package group

import (
	"slices"
	"testing"

	"github.com/missionweave/mwp-worker/group/grouptest"
	"github.com/missionweave/mwp-worker/protocol"
)

// The rules table's WorkItem source states are the spec 10.2 table as the
// tests write it out independently (grouptest.Transitions).
func TestRulesTableMatchesTransitions(t *testing.T) {
	for typ, rows := range grouptest.Transitions {
		rule, ok := protocol.Commands[protocol.CommandType(typ)]
		if !ok {
			continue // child outcomes are not commands
		}
		var want []protocol.WorkItemState
		for from := range rows {
			want = append(want, from)
		}
		got := slices.Clone(rule.WorkFrom)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: rules table allows %v, the 10.2 table %v", typ, got, want)
		}
	}
}
