package slots

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

func clarifyExec(t *testing.T, timeout time.Duration) ClarifyingExec {
	script, err := filepath.Abs("testdata/clarify-handler.py")
	if err != nil {
		t.Fatal(err)
	}
	return ClarifyingExec{Exec: Exec{Path: python(t), Args: []string{script}, Cap: protocol.Capability{ID: "echo", Version: "1.0.0"},
		Env: map[string]string{"MWP_CREDENTIAL": "leaked", "EXTRA": "1"}}, Timeout: timeout}
}

func clarifyRequest(t *testing.T, mode string) ClarifyRequest {
	return ClarifyRequest{GroupID: "grp-a", MissionID: "mis-a", WorkItemID: "wi-1", OfferID: "off-1",
		Contract: protocol.WorkContract{Notes: mode}, Dir: t.TempDir()}
}

// The clarify exchange (EXTERNAL.md): one message in, one clarification
// out, the program's exit; anything else is refused with the reason.
func TestClarifyOffer(t *testing.T) {
	cases := []struct {
		mode    string
		want    []string
		wantErr string
	}{
		{mode: "ask", want: []string{"which branch, for wi-1 (off-1)?"}},
		{mode: "none", want: []string{}},
		// No credential and no lease, even through Exec.Env; the offer's
		// ids instead, in a private working directory.
		{mode: "env", want: []string{"MWP_GROUP_ID MWP_OFFER_ID MWP_WORKDIR MWP_WORK_ITEM_ID", "cwd-private"}},
		{mode: "bad", wantErr: "PROTOCOL_VIOLATION"},
		{mode: "wrong-type", wantErr: `must be a clarification, not "result"`},
		{mode: "missing", wantErr: "questions: required"},
		{mode: "two-lines", wantErr: "nothing may follow"},
		{mode: "exit1", wantErr: "exited with exit status 1"},
		{mode: "silent", wantErr: "exited without a clarification; stderr: cannot read contracts"},
		{mode: "hang", wantErr: "did not answer clarify within"},
		{mode: "linger", wantErr: "answered clarify but did not exit within"},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			timeout := 5 * time.Second
			if c.mode == "hang" || c.mode == "linger" {
				timeout = 300 * time.Millisecond
			}
			req := clarifyRequest(t, c.mode)
			qs, err := clarifyExec(t, timeout).ClarifyOffer(context.Background(), req)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q (questions %q)", err, c.wantErr, qs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(qs, "|") != strings.Join(c.want, "|") || qs == nil {
				t.Fatalf("questions %q, want %q", qs, c.want)
			}
			if left, _ := filepath.Glob(filepath.Join(req.Dir, "clarify-*")); len(left) != 0 {
				t.Fatalf("working directory left behind: %v", left)
			}
		})
	}
}

// The caller's context ends the exchange too (the worker stopping).
func TestClarifyOfferCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := clarifyExec(t, time.Minute).ClarifyOffer(ctx, clarifyRequest(t, "hang"))
		done <- err
	}()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled exchange answered")
	}
}

func TestDecodeClarification(t *testing.T) {
	long := strings.Repeat("x", MaxQuestionBytes+1)
	many := `"q"` + strings.Repeat(`,"q"`, MaxClarifyQuestions)
	for _, c := range []struct{ line, want string }{
		{`{"type":"clarification","questions":["a","b"]}`, ""},
		{`{"type":"clarification","questions":[]}`, ""},
		{`{"type":"clarification","questions":null}`, "PROTOCOL_VIOLATION"},
		{`{"type":"clarification","questions":[""]}`, "questions[0]"},
		{`{"type":"clarification","questions":["` + long + `"]}`, "questions[0]"},
		{`{"type":"clarification","questions":[` + many + `]}`, "at most"},
		{`{"type":"clarification","questions":["a"],"type2":1}`, "PROTOCOL_VIOLATION"},
		{`{"type":"clarification","questions":["a"],"questions":["b"]}`, "duplicate"},
		{`[]`, "JSON object"},
	} {
		_, err := decodeClarification([]byte(c.line))
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: err %v, want %q", c.line, err, c.want)
		}
	}
}
