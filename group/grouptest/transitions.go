package grouptest

import "github.com/missionweave/mwp-worker/protocol"

// Transitions is the spec 10.2 table written out independently of the
// implementation: command (or child outcome) → source state → targets.
// Same-state rows are the ones the table keeps in place (approval gate,
// lease renewal, renewed acceptance, contract revision).
var Transitions = map[string]map[protocol.WorkItemState][]protocol.WorkItemState{
	string(protocol.CmdWorkOffer): fromEach([]protocol.WorkItemState{"open", "offered", "queued", "active", "blocked", "failed"}, "offered"),
	string(protocol.CmdWorkAcceptOffer): {
		"offered": {"queued"}, "queued": {"queued"}, "blocked": {"blocked"},
	},
	string(protocol.CmdApprovalGrantExecution): {"queued": {"queued"}},
	string(protocol.CmdWorkStart):              {"queued": {"active"}},
	string(protocol.CmdWorkCheckpoint):         {"active": {"queued"}},
	string(protocol.CmdWorkBlock):              {"active": {"blocked"}},
	string(protocol.CmdWorkUnblock):            {"blocked": {"queued", "open"}},
	string(protocol.CmdWorkSubmit):             {"active": {"submitted"}},
	string(protocol.CmdWorkAcceptResult):       {"submitted": {"verified"}},
	string(protocol.CmdWorkFail):               fromEach([]protocol.WorkItemState{"open", "offered", "queued", "active", "blocked", "submitted"}, "failed"),
	string(protocol.CmdWorkCancel):             fromEach([]protocol.WorkItemState{"open", "offered", "queued", "active", "blocked", "submitted"}, "cancelled"),
	string(protocol.CmdMissionCreateChild):     fromEach([]protocol.WorkItemState{"open", "offered", "queued", "active", "blocked"}, "blocked"),
	string(protocol.CmdLeaseRenew):             {"active": {"active"}},
	string(protocol.CmdDependencyInsert):       fromEach([]protocol.WorkItemState{"open", "offered", "queued", "blocked", "failed"}, ""),
	"child_outcome":                            {"blocked": {"verified", "blocked", "failed"}},
}

func fromEach(from []protocol.WorkItemState, to protocol.WorkItemState) map[protocol.WorkItemState][]protocol.WorkItemState {
	m := map[protocol.WorkItemState][]protocol.WorkItemState{}
	for _, s := range from {
		if to == "" {
			m[s] = []protocol.WorkItemState{s}
		} else {
			m[s] = []protocol.WorkItemState{to}
		}
	}
	return m
}
