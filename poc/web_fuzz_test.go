package poc

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// FuzzDecisionPost feeds arbitrary form bodies to the decision endpoint. The
// page must never panic, must answer every refused post with a 4xx/5xx and
// no accepted command, and every 200 must be exactly one accepted command
// that names a pending mission with the revision the body carried.
func FuzzDecisionPost(f *testing.F) {
	f.Add("mission=mis-a&revision=7&decision=approve", true)
	f.Add("mission=mis-a&revision=7&decision=request_changes&comment=add+a+test%0Arename", true)
	f.Add("mission=mis-a&revision=7&decision=approve", false)
	f.Add("mission=mis-a&mission=mis-b&revision=7&revision=8&decision=approve", true)
	f.Add("mission=mis-a&revision=99999999999999999999&decision=approve", true)
	f.Add("mission=%ff%fe&revision=7&decision=request_changes&comment=%00%01", true)
	f.Add("%zz=1&mission", true)
	f.Fuzz(func(t *testing.T, body string, withToken bool) {
		clk := clock.NewFake(t0)
		auth, approver := newFakeAuthority(t, clk)
		auth.addMission("mis-a", "grp-a", 7, "x")
		srv := NewApprovalServer(auth, approver, clk, nil)
		if withToken {
			body = "csrf=" + srv.csrf + "&" + body
		}
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/decide", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		cmds := auth.commands()
		if rec.Code != http.StatusOK {
			if rec.Code < 400 || len(cmds) != 0 {
				t.Fatalf("status %d with %d accepted commands", rec.Code, len(cmds))
			}
			return
		}
		if len(cmds) != 1 {
			t.Fatalf("200 with %d accepted commands", len(cmds))
		}
		c := cmds[0]
		if c.GroupID != "grp-a" || *c.ExpectedRevision != 7 || (c.Type != protocol.CmdMissionApprove && c.Type != protocol.CmdMissionRequestChanges) {
			t.Fatalf("accepted %+v", c)
		}
		if strings.Contains(rec.Body.String(), "<script") {
			t.Fatal("result page carries a script tag")
		}
	})
}
