package poc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

func TestApproveFromTerminal(t *testing.T) {
	tests := []struct {
		name        string
		input       string
		wantType    protocol.CommandType
		wantChanges []string
		wantComment string
		wantErr     error
		wantOut     []string
	}{
		{name: "approve with a comment", input: "a\nlooks good\n", wantType: protocol.CmdMissionApprove, wantComment: "looks good",
			wantOut: []string{"Accepted: mission.approve", "event evt-41 grp-a #41"}},
		{name: "approve at end of input", input: "approve", wantType: protocol.CmdMissionApprove},
		{name: "request changes, one per line", input: "r\nadd a test\n  rename Foo\n\nignored\n", wantType: protocol.CmdMissionRequestChanges,
			wantChanges: []string{"add a test", "rename Foo"}, wantComment: "add a test\n  rename Foo", wantOut: []string{"Accepted: mission.request_changes"}},
		{name: "a wrong answer is asked again", input: "maybe\nR\nfix it\n", wantType: protocol.CmdMissionRequestChanges, wantChanges: []string{"fix it"},
			wantComment: "fix it", wantOut: []string{"Please answer a, r or q."}},
		{name: "request changes with no change", input: "r\n\n", wantErr: ErrNoDecision},
		{name: "quit", input: "q\n", wantErr: ErrNoDecision},
		{name: "three wrong answers", input: "x\ny\nz\na\n", wantErr: ErrNoDecision},
		{name: "input ends", input: "", wantErr: ErrNoDecision},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			auth, approver := newFakeAuthority(t, clk)
			auth.addMission("mis-a", "grp-a", 7, "unit tests pass\x1b[2J\x1b]0;owned\x07", [2]string{"text/x-diff", "+x\n"})
			var out strings.Builder
			err := ApproveFromTerminal(context.Background(), strings.NewReader(tc.input), &out, auth, approver, clk, "mis-a")
			text := out.String()
			for _, want := range append([]string{`Mission mis-a "Mission mis-a" (group grp-a, revision 7)`, "[pass] unit tests pass", "text/x-diff 3 bytes"}, tc.wantOut...) {
				if !strings.Contains(text, want) {
					t.Errorf("output lacks %q:\n%s", want, text)
				}
			}
			if strings.ContainsRune(text, 0x1b) || strings.ContainsRune(text, 0x07) {
				t.Errorf("terminal escape from evidence reached the output: %q", text)
			}
			cmds := auth.commands()
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || len(cmds) != 0 {
					t.Fatalf("err = %v with %d commands, want %v and none", err, len(cmds), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cmds) != 1 || cmds[0].Type != tc.wantType || *cmds[0].ExpectedRevision != 7 {
				t.Fatalf("accepted %+v", cmds)
			}
			var p struct {
				Changes []string `json:"changes"`
				Comment string   `json:"comment"`
			}
			if err := json.Unmarshal(cmds[0].Payload, &p); err != nil {
				t.Fatal(err)
			}
			if strings.Join(p.Changes, "|") != strings.Join(tc.wantChanges, "|") || p.Comment != tc.wantComment {
				t.Errorf("payload %s", cmds[0].Payload)
			}
		})
	}
}

func TestApproveFromTerminalRefusals(t *testing.T) {
	clk := clock.NewFake(t0)
	auth, approver := newFakeAuthority(t, clk)
	auth.addMission("mis-a", "grp-a", 7, "x")
	var out strings.Builder
	if err := ApproveFromTerminal(context.Background(), strings.NewReader("a\n"), &out, auth, approver, clk, "mis-z"); protocol.CodeOf(err) != protocol.CodeInvalidStateTransition {
		t.Fatalf("unknown mission: err = %v", err)
	}
	// The Mission moved on between listing and deciding.
	auth.refuse = protocol.Errorf(protocol.CodeRevisionConflict, "mission mis-a is at revision 8, command expected 7")
	out.Reset()
	err := ApproveFromTerminal(context.Background(), strings.NewReader("a\n\n"), &out, auth, approver, clk, "mis-a")
	if !errors.Is(err, &protocol.Error{Code: protocol.CodeRevisionConflict}) || !strings.Contains(out.String(), "Refused: REVISION_CONFLICT") {
		t.Fatalf("err = %v, output:\n%s", err, out.String())
	}
}

// TestApproveNonInteractive: the scripted decision signs the same
// Commands as the prompt, with the revision the summary showed, and a
// request for changes without a change sends nothing.
func TestApproveNonInteractive(t *testing.T) {
	tests := []struct {
		name        string
		approve     bool
		comment     string
		mission     string
		wantType    protocol.CommandType
		wantChanges []string
		wantErr     error
		wantCode    protocol.Code
	}{
		{name: "approve", approve: true, comment: "ship it", mission: "mis-a", wantType: protocol.CmdMissionApprove},
		{name: "approve without comment", approve: true, mission: "mis-a", wantType: protocol.CmdMissionApprove},
		{name: "request changes, one per line", comment: "add a test\n\n rename Foo", mission: "mis-a", wantType: protocol.CmdMissionRequestChanges,
			wantChanges: []string{"add a test", "rename Foo"}},
		{name: "request changes without a change", comment: " \n", mission: "mis-a", wantErr: ErrNoDecision},
		{name: "unknown mission", approve: true, mission: "mis-z", wantCode: protocol.CodeInvalidStateTransition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			auth, approver := newFakeAuthority(t, clk)
			auth.addMission("mis-a", "grp-a", 7, "unit tests pass")
			var out strings.Builder
			err := ApproveNonInteractive(context.Background(), &out, auth, approver, clk, tc.mission, tc.approve, tc.comment)
			cmds := auth.commands()
			switch {
			case tc.wantErr != nil || tc.wantCode != "":
				if (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || (tc.wantCode != "" && protocol.CodeOf(err) != tc.wantCode) || len(cmds) != 0 {
					t.Fatalf("err = %v with %d commands", err, len(cmds))
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if len(cmds) != 1 || cmds[0].Type != tc.wantType || *cmds[0].ExpectedRevision != 7 {
				t.Fatalf("accepted %+v", cmds)
			}
			var p struct {
				Changes []string `json:"changes"`
				Comment string   `json:"comment"`
			}
			if err := json.Unmarshal(cmds[0].Payload, &p); err != nil {
				t.Fatal(err)
			}
			if strings.Join(p.Changes, "|") != strings.Join(tc.wantChanges, "|") || p.Comment != tc.comment {
				t.Errorf("payload %s", cmds[0].Payload)
			}
			if text := out.String(); strings.Count(text, "\n") != 1 || !strings.HasPrefix(text, "mission mis-a: "+string(tc.wantType)+" accepted, event ") {
				t.Errorf("output, want one line:\n%s", text)
			}
		})
	}
}
