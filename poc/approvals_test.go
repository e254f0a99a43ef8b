package poc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

func TestBuildDecision(t *testing.T) {
	human := protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}
	p := PendingMission{MissionID: "mis-a", GroupID: "grp-a", Revision: 7, MembershipEpoch: 3}
	now := t0.Add(1500 * time.Millisecond)
	tests := []struct {
		name        string
		d           Decision
		actor       protocol.Actor
		wantType    protocol.CommandType
		wantPayload string
		wantCode    protocol.Code
	}{
		{name: "approve", d: Decision{MissionID: "mis-a", Approve: true, ExpectedRevision: 7}, actor: human,
			wantType: protocol.CmdMissionApprove, wantPayload: `{"missionId":"mis-a","approvalId":"apr-1"}`},
		{name: "approve with comment", d: Decision{MissionID: "mis-a", Approve: true, Comment: "  ship it \n", ExpectedRevision: 7}, actor: human,
			wantType: protocol.CmdMissionApprove, wantPayload: `{"missionId":"mis-a","approvalId":"apr-1","comment":"ship it"}`},
		{name: "request changes, one change per line", d: Decision{MissionID: "mis-a", Comment: "add a test\n\n  rename Foo \n", ExpectedRevision: 6}, actor: human,
			wantType: protocol.CmdMissionRequestChanges, wantPayload: `{"missionId":"mis-a","changes":["add a test","rename Foo"],"comment":"add a test\n\n  rename Foo"}`},
		{name: "request changes without a comment", d: Decision{MissionID: "mis-a", Comment: " \n\t"}, actor: human, wantCode: protocol.CodeInvalidCommand},
		{name: "comment too long", d: Decision{MissionID: "mis-a", Approve: true, Comment: strings.Repeat("x", maxCommentBytes+1)}, actor: human, wantCode: protocol.CodeInvalidCommand},
		{name: "too many change lines", d: Decision{MissionID: "mis-a", Comment: strings.Repeat("x\n", maxChanges+1)}, actor: human, wantCode: protocol.CodeInvalidCommand},
		{name: "an agent is never the approver", d: Decision{MissionID: "mis-a", Approve: true}, actor: protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}, wantCode: protocol.CodeAuthForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := BuildDecision(tc.d, p, tc.actor, now, "act-1", "apr-1")
			if tc.wantCode != "" {
				if protocol.CodeOf(err) != tc.wantCode {
					t.Fatalf("err = %v, want code %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cmd.Type != tc.wantType || string(cmd.Payload) != tc.wantPayload {
				t.Fatalf("got %s %s, want %s %s", cmd.Type, cmd.Payload, tc.wantType, tc.wantPayload)
			}
			if cmd.GroupID != "grp-a" || cmd.CorrelationID != "mis-a" || cmd.ActionID != "act-1" || cmd.Actor != human {
				t.Errorf("envelope %+v", cmd)
			}
			if cmd.MembershipEpoch == nil || *cmd.MembershipEpoch != 3 || cmd.SessionEpoch != nil || cmd.CoordinatorEpoch != nil {
				t.Errorf("epochs: membership %v session %v coordinator %v", cmd.MembershipEpoch, cmd.SessionEpoch, cmd.CoordinatorEpoch)
			}
			if cmd.ExpectedRevision == nil || *cmd.ExpectedRevision != tc.d.ExpectedRevision {
				t.Errorf("expectedRevision %v, want %d", cmd.ExpectedRevision, tc.d.ExpectedRevision)
			}
			if !cmd.IssuedAt.Equal(now) {
				t.Errorf("issuedAt %s, want %s", cmd.IssuedAt, now)
			}
		})
	}
	if _, err := BuildDecision(Decision{MissionID: "mis-b", Approve: true}, p, human, now, "act-1", "apr-1"); err == nil {
		t.Error("a decision for another mission was built")
	}
}

func TestDecideSignsWhatTheAuthorityVerifies(t *testing.T) {
	clk := clock.NewFake(t0)
	auth, approver := newFakeAuthority(t, clk)
	p := auth.addMission("mis-a", "grp-a", 7, "tests pass")
	ctx := context.Background()

	cmd, rec, err := approver.Decide(ctx, Decision{MissionID: "mis-a", Approve: true, ExpectedRevision: 7}, p, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Events) != 1 || rec.ActionID != cmd.ActionID {
		t.Fatalf("receipt %+v for action %s", rec, cmd.ActionID)
	}
	if got := auth.commands(); len(got) != 1 || got[0].Signature.Value == "" || got[0].Signature.KeyID != "human:alice#k1" {
		t.Fatalf("accepted %+v", got)
	}

	// Two decisions never share an actionId or an approvalId.
	p2 := auth.addMission("mis-b", "grp-b", 2, "tests pass")
	cmd2, _, err := approver.Decide(ctx, Decision{MissionID: "mis-b", Approve: true, ExpectedRevision: 2}, p2, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if cmd2.ActionID == cmd.ActionID || string(cmd2.Payload) == string(cmd.Payload) {
		t.Errorf("ids reused: %s %s / %s %s", cmd.ActionID, cmd.Payload, cmd2.ActionID, cmd2.Payload)
	}
}

func TestDecideRefusals(t *testing.T) {
	clk := clock.NewFake(t0)
	ctx := context.Background()
	t.Run("stale page gets REVISION_CONFLICT", func(t *testing.T) {
		auth, approver := newFakeAuthority(t, clk)
		p := auth.addMission("mis-a", "grp-a", 7, "x")
		auth.bumpRevision("mis-a")
		_, _, err := approver.Decide(ctx, Decision{MissionID: "mis-a", Approve: true, ExpectedRevision: p.Revision}, p, clk.Now())
		if !errors.Is(err, &protocol.Error{Code: protocol.CodeRevisionConflict}) {
			t.Fatalf("err = %v, want REVISION_CONFLICT", err)
		}
		if len(auth.commands()) != 0 {
			t.Error("a stale decision was accepted")
		}
	})
	t.Run("a stale clock fails freshness at the authority", func(t *testing.T) {
		auth, approver := newFakeAuthority(t, clk)
		p := auth.addMission("mis-a", "grp-a", 7, "x")
		_, _, err := approver.Decide(ctx, Decision{MissionID: "mis-a", Approve: true, ExpectedRevision: 7}, p, clk.Now().Add(-time.Hour))
		if protocol.CodeOf(err) != protocol.CodeAuthInvalidSignature {
			t.Fatalf("err = %v, want AUTH_INVALID_SIGNATURE", err)
		}
	})
	t.Run("a key that is not the human's", func(t *testing.T) {
		auth, approver := newFakeAuthority(t, clk)
		p := auth.addMission("mis-a", "grp-a", 7, "x")
		other, err := protocol.GenerateKey("human:alice#k1", nil)
		if err != nil {
			t.Fatal(err)
		}
		approver.Key = other
		_, _, err = approver.Decide(ctx, Decision{MissionID: "mis-a", Approve: true, ExpectedRevision: 7}, p, clk.Now())
		if protocol.CodeOf(err) != protocol.CodeAuthInvalidSignature {
			t.Fatalf("err = %v, want AUTH_INVALID_SIGNATURE", err)
		}
	})
	t.Run("no submit function", func(t *testing.T) {
		auth, approver := newFakeAuthority(t, clk)
		p := auth.addMission("mis-a", "grp-a", 7, "x")
		approver.Submit = nil
		if _, _, err := approver.Decide(ctx, Decision{MissionID: "mis-a", Approve: true, ExpectedRevision: 7}, p, clk.Now()); err == nil {
			t.Fatal("decided without a way to submit")
		}
	})
}

func TestFindPending(t *testing.T) {
	auth, _ := newFakeAuthority(t, clock.NewFake(t0))
	auth.addMission("mis-a", "grp-a", 7, "x")
	if p, err := FindPending(context.Background(), auth, "mis-a"); err != nil || p.GroupID != "grp-a" {
		t.Fatalf("FindPending = %+v, %v", p, err)
	}
	if _, err := FindPending(context.Background(), auth, "mis-z"); protocol.CodeOf(err) != protocol.CodeInvalidStateTransition {
		t.Fatalf("err = %v, want INVALID_STATE_TRANSITION", err)
	}
}

func TestFetchArtifactVerifiesHashAndSize(t *testing.T) {
	auth, _ := newFakeAuthority(t, clock.NewFake(t0))
	p := auth.addMission("mis-a", "grp-a", 7, "x", [2]string{"text/x-diff", "--- a\n+++ b\n"})
	m := p.Artifacts[0]
	ctx := context.Background()
	if b, err := FetchArtifact(ctx, auth, m); err != nil || string(b) != "--- a\n+++ b\n" {
		t.Fatalf("FetchArtifact = %q, %v", b, err)
	}
	wrongSize := m
	wrongSize.Size++
	if _, err := FetchArtifact(ctx, auth, wrongSize); err == nil {
		t.Error("a size mismatch was accepted")
	}
	auth.corrupt(m.ContentHash)
	if _, err := FetchArtifact(ctx, auth, m); err == nil || !strings.Contains(err.Error(), "hash") {
		t.Errorf("tampered bytes: err = %v", err)
	}
	missing := m
	missing.ContentHash = protocol.Digest([]byte("nothing"))
	if _, err := FetchArtifact(ctx, auth, missing); err == nil {
		t.Error("a missing artifact was returned")
	}
}

func TestChangeLinesAndNewID(t *testing.T) {
	if got := ChangeLines("a\r\n \n b \nc"); strings.Join(got, "|") != "a|b|c" {
		t.Errorf("ChangeLines = %q", got)
	}
	if id := NewID("act"); !validID(id) || !strings.HasPrefix(id, "act-") || id == NewID("act") {
		t.Errorf("NewID = %q", id)
	}
}

func TestAutoApprove(t *testing.T) {
	clk := clock.NewFake(t0)
	auth, approver := newFakeAuthority(t, clk)
	auth.addMission("mis-a", "grp-a", 7, "x")
	auth.addMission("mis-b", "grp-b", 2, "y")
	cmds, err := AutoApprove(context.Background(), auth, approver, clk, "unattended run")
	if err != nil || len(cmds) != 2 {
		t.Fatalf("AutoApprove = %d commands, %v", len(cmds), err)
	}
	for i, c := range auth.commands() {
		if c.Type != protocol.CmdMissionApprove || c.ActionID != cmds[i].ActionID || !strings.Contains(string(c.Payload), `"comment":"unattended run"`) {
			t.Errorf("accepted %+v", c)
		}
	}
	if left, _ := auth.Pending(context.Background()); len(left) != 0 {
		t.Errorf("still pending: %+v", left)
	}
	// A refusal stops the loop and is returned.
	auth.addMission("mis-c", "grp-c", 1, "z")
	auth.addMission("mis-d", "grp-d", 1, "z")
	auth.refuse = protocol.Errorf(protocol.CodeMembershipStale, "epoch moved")
	cmds, err = AutoApprove(context.Background(), auth, approver, clk, "")
	if protocol.CodeOf(err) != protocol.CodeMembershipStale || len(cmds) != 0 {
		t.Fatalf("AutoApprove = %d commands, %v", len(cmds), err)
	}
}
