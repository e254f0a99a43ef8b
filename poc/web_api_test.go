package poc

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// TestTerminalAPI drives the terminal fallback against the page's API: it
// lists the pending Mission, signs a decision locally, and the page relays
// the signed bytes; a wrong token and a command of another type are refused.
func TestTerminalAPI(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	fa, approver := newFakeAuthority(t, clk)
	fa.addMission("mis-a", "grp-a", 7, "wi-a", [2]string{"text/markdown", "# note"})
	srv := NewApprovalServer(fa, approver, clk, nil)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	client := &APIClient{Info: APIInfo{URL: hs.URL + "/", Token: srv.APIToken(), Human: approver.Human.ID}, HTTP: hs.Client()}

	list, err := client.Pending(context.Background())
	if err != nil || len(list) != 1 || list[0].MissionID != "mis-a" {
		t.Fatalf("pending: %v %+v", err, list)
	}
	local := Approver{Human: approver.Human, Key: approver.Key, Submit: client.Submit}
	var out strings.Builder
	if err := ApproveFromTerminal(context.Background(), strings.NewReader("a\nlooks good\n"), &out, client, local, clk, "mis-a"); err != nil {
		t.Fatalf("approve: %v\n%s", err, out.String())
	}
	cmds := fa.commands()
	if len(cmds) != 1 || cmds[0].Type != protocol.CmdMissionApprove || *cmds[0].ExpectedRevision != 7 {
		t.Fatalf("relayed %+v", cmds)
	}
	bad := &APIClient{Info: APIInfo{URL: hs.URL + "/", Token: "wrong"}, HTTP: hs.Client()}
	if _, err := bad.Pending(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := client.Submit(context.Background(), []byte(`{"type":"work.cancel"}`)); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
		t.Fatalf("other command type relayed: %v", err)
	}
}
