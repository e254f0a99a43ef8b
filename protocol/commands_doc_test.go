package protocol

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var commandsDocUpdate = flag.Bool("update-commands-doc", false, "rewrite docs/commands.md from the rules table")

// TestCommandsDoc keeps docs/commands.md the rendering of Commands, the one
// rules table: run with -update-commands-doc after changing a row.
func TestCommandsDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "commands.md")
	got := renderCommands()
	if *commandsDocUpdate {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Fatalf("docs/commands.md is not the rendering of protocol.Commands; run go test ./protocol -run TestCommandsDoc -update-commands-doc")
	}
}

func renderCommands() string {
	var b strings.Builder
	b.WriteString(`# Command types: the rules table

Generated from ` + "`protocol.Commands`" + ` by ` + "`go test ./protocol -run TestCommandsDoc -update-commands-doc`" + `;
a test fails when this page and the table disagree. The table is read by the spec 15.1 epoch
checks (` + "`protocol.CheckCommandEpochs`" + `), by the Group state machine (` + "`group`" + `: who may send, from
which states) and by in-process principals and coordinators (which epochs to carry).

- **scope**: ` + "`organization`" + ` (no groupId and no epochs), ` + "`newGroup`" + ` (names the Group it creates; no
  epochs), ` + "`group`" + ` (inside an existing Group: agents carry sessionEpoch and membershipEpoch,
  humans membershipEpoch, services neither).
- **coordinatorEpoch**: ` + "`required`" + ` (only the coordinator lease authorizes it: an agent must carry it,
  a human or service may not send the command), ` + "`forAgents`" + ` (an agent must carry it; a policy
  service acts without), ` + "`onLease`" + ` (the coordinator acting on its lease carries it and the
  authority requires it then; the MissionOwner or the owning worker send it without), ` + "`never`" + `.
- **sender**: who may send it, decided against the Group's state.
- **from**: the WorkItem (spec 10.2) or Mission (docs/design.md §11) states it is allowed from; a
  command from any other is INVALID_STATE_TRANSITION.

| command | payload | scope | coordinatorEpoch | sender | aggregate | from |
| --- | --- | --- | --- | --- | --- | --- |
`)
	types := make([]CommandType, 0, len(Commands))
	for t := range Commands {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, t := range types {
		r := Commands[t]
		var from []string
		if len(r.MissionFrom) > 0 {
			var s []string
			for _, x := range r.MissionFrom {
				s = append(s, string(x))
			}
			from = append(from, "Mission "+strings.Join(s, ", "))
		}
		if len(r.WorkFrom) > 0 {
			var s []string
			for _, x := range r.WorkFrom {
				s = append(s, string(x))
			}
			from = append(from, "WorkItem "+strings.Join(s, ", "))
		}
		agg := string(r.Aggregate)
		if agg == "" {
			agg = "—"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s | %s | %s |\n", t, r.Payload.Name(), r.Scope, r.CoordinatorEpoch, r.Sender, agg, strings.Join(from, "; "))
	}
	return b.String()
}
