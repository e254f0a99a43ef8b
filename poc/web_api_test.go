package poc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// eventsFake is the fake authority with a log per Group, the source of
// the page's GET /api/events/GROUP.
type eventsFake struct {
	*fakeAuthority
	logs map[string][]json.RawMessage
}

func (f eventsFake) GroupEvents(_ context.Context, groupID string) ([]json.RawMessage, error) {
	evs, ok := f.logs[groupID]
	if !ok {
		return nil, fmt.Errorf("no group %s", groupID)
	}
	return evs, nil
}

// GET /api/events/GROUP relays a Group's events in log order, each byte
// for byte (an event's bytes are what its signature covers, "<" and all),
// behind the bearer token; a Group the source does not know, and a page
// whose source reads no logs, answer 404.
func TestTerminalAPIEvents(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	fa, approver := newFakeAuthority(t, clk)
	log := []json.RawMessage{
		json.RawMessage(`{"seq":1,"type":"mission.created","payload":{"title":"a <b> & c"}}`),
		json.RawMessage(`{"seq":2,"type":"mission.submitted_for_approval","payload":{"summary":"ok \u2028"}}`),
	}
	srv := NewApprovalServer(eventsFake{fa, map[string][]json.RawMessage{"grp-a": log}}, approver, clk, nil)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	client := &APIClient{Info: APIInfo{URL: hs.URL + "/", Token: srv.APIToken()}, HTTP: hs.Client()}

	got, err := client.GroupEvents(context.Background(), "grp-a")
	if err != nil || len(got) != len(log) {
		t.Fatalf("events of grp-a: %v, %d events", err, len(got))
	}
	for i := range log {
		if !bytes.Equal(got[i], log[i]) {
			t.Errorf("event %d relayed as %s, want %s", i, got[i], log[i])
		}
	}
	if _, err := client.GroupEvents(context.Background(), "grp-z"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("an unknown Group: %v", err)
	}
	bad := &APIClient{Info: APIInfo{URL: hs.URL + "/", Token: "wrong"}, HTTP: hs.Client()}
	if _, err := bad.GroupEvents(context.Background(), "grp-a"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong token: %v", err)
	}
	plain := NewApprovalServer(fa, approver, clk, nil) // a source that reads no logs
	hp := httptest.NewServer(plain)
	defer hp.Close()
	c2 := &APIClient{Info: APIInfo{URL: hp.URL + "/", Token: plain.APIToken()}, HTTP: hp.Client()}
	if _, err := c2.GroupEvents(context.Background(), "grp-a"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a page without logs: %v", err)
	}
}
