package poc

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

const scriptEvidence = `<script>alert("pwned")</script> & "quotes"`

type pageFixture struct {
	auth *fakeAuthority
	srv  *ApprovalServer
	ts   *httptest.Server
	a, b PendingMission
}

func newPageFixture(t *testing.T) *pageFixture {
	t.Helper()
	clk := clock.NewFake(t0)
	auth, approver := newFakeAuthority(t, clk)
	f := &pageFixture{auth: auth}
	f.a = auth.addMission("mis-a", "grp-a", 7, scriptEvidence,
		[2]string{"text/x-diff", "--- a/x.go\n+++ b/x.go\n"},
		[2]string{"text/html", "<script>alert(1)</script>"},
		[2]string{"application/octet-stream", "\x00\x01\x02"})
	f.b = auth.addMission("mis-b", "grp-b", 4, "integration tests pass")
	f.srv = NewApprovalServer(auth, approver, clk, nil)
	f.ts = httptest.NewServer(f.srv)
	t.Cleanup(f.ts.Close)
	return f
}

func (f *pageFixture) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	resp, err := f.ts.Client().Get(f.ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func (f *pageFixture) post(t *testing.T, form url.Values, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.ts.URL+"/decide", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// csrfFrom reads the form token from a rendered page, as a browser would.
func csrfFrom(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("page has no csrf field")
	}
	return m[1]
}

func TestIndexListsMissionsAndEscapesEvidence(t *testing.T) {
	f := newPageFixture(t)
	resp, page := f.get(t, "/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, want := range []string{
		`id="mission-mis-a"`, `id="mission-mis-b"`, `data-revision="7"`, `data-revision="4"`,
		`id="approve-mis-a"`, `id="changes-mis-b"`, `name="revision" value="7"`,
		`&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt; &amp; &#34;quotes&#34;`,
		`href="/artifacts/` + f.a.Artifacts[0].ContentHash + `"`, "text/x-diff", "go test ./...",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, "<script") {
		t.Error("untrusted evidence reached the page unescaped")
	}
	h := resp.Header
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("CSP %q allows scripts", csp)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", h)
	}
}

func TestIndexWithNothingPending(t *testing.T) {
	clk := clock.NewFake(t0)
	auth, approver := newFakeAuthority(t, clk)
	ts := httptest.NewServer(NewApprovalServer(auth, approver, clk, nil))
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `id="no-missions"`) {
		t.Errorf("empty list not shown: %s", body)
	}
}

func TestDecisionPosts(t *testing.T) {
	tests := []struct {
		name       string
		form       func(csrf string) url.Values
		header     []string
		before     func(f *pageFixture)
		wantStatus int
		wantInBody string
		wantType   protocol.CommandType
	}{
		{name: "approve", form: func(c string) url.Values { return decisionForm(c, "mis-a", "7", "approve", "") },
			wantStatus: http.StatusOK, wantInBody: `data-outcome="accepted"`, wantType: protocol.CmdMissionApprove},
		{name: "request changes", form: func(c string) url.Values { return decisionForm(c, "mis-b", "4", "request_changes", "add a test") },
			wantStatus: http.StatusOK, wantInBody: "evt-41", wantType: protocol.CmdMissionRequestChanges},
		{name: "request changes needs a comment", form: func(c string) url.Values { return decisionForm(c, "mis-b", "4", "request_changes", "  \n ") },
			wantStatus: http.StatusBadRequest, wantInBody: `data-code="INVALID_COMMAND"`},
		{name: "no csrf token", form: func(string) url.Values { return decisionForm("", "mis-a", "7", "approve", "") },
			wantStatus: http.StatusForbidden, wantInBody: `data-code="AUTH_FORBIDDEN"`},
		{name: "wrong csrf token", form: func(c string) url.Values { return decisionForm(c+"x", "mis-a", "7", "approve", "") },
			wantStatus: http.StatusForbidden, wantInBody: `data-code="AUTH_FORBIDDEN"`},
		{name: "cross-site post", form: func(c string) url.Values { return decisionForm(c, "mis-a", "7", "approve", "") },
			header: []string{"Sec-Fetch-Site", "cross-site"}, wantStatus: http.StatusForbidden},
		{name: "stale page", form: func(c string) url.Values { return decisionForm(c, "mis-a", "7", "approve", "") },
			before: func(f *pageFixture) { f.auth.bumpRevision("mis-a") }, wantStatus: http.StatusConflict, wantInBody: `data-code="REVISION_CONFLICT"`},
		{name: "already decided", form: func(c string) url.Values { return decisionForm(c, "mis-z", "1", "approve", "") },
			wantStatus: http.StatusConflict, wantInBody: `data-code="INVALID_STATE_TRANSITION"`},
		{name: "unknown decision", form: func(c string) url.Values { return decisionForm(c, "mis-a", "7", "merge", "") },
			wantStatus: http.StatusBadRequest},
		{name: "bad revision", form: func(c string) url.Values { return decisionForm(c, "mis-a", "-1", "approve", "") },
			wantStatus: http.StatusBadRequest},
		{name: "bad mission id", form: func(c string) url.Values { return decisionForm(c, "<b>", "7", "approve", "") },
			wantStatus: http.StatusBadRequest, wantInBody: "&lt;b&gt;"},
		{name: "authority down", form: func(c string) url.Values { return decisionForm(c, "mis-a", "7", "approve", "") },
			before: func(f *pageFixture) { f.auth.refuse = io.ErrUnexpectedEOF }, wantStatus: http.StatusBadGateway, wantInBody: `data-code="INTERNAL_ERROR"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newPageFixture(t)
			_, page := f.get(t, "/")
			if tc.before != nil {
				tc.before(f)
			}
			resp, body := f.post(t, tc.form(csrfFrom(t, page)), tc.header...)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(body, tc.wantInBody) {
				t.Fatalf("status %d, want %d; body contains %q: %v\n%s", resp.StatusCode, tc.wantStatus, tc.wantInBody, strings.Contains(body, tc.wantInBody), body)
			}
			cmds := f.auth.commands()
			if tc.wantType == "" {
				if len(cmds) != 0 {
					t.Fatalf("refused post still produced %d accepted command(s)", len(cmds))
				}
				return
			}
			if len(cmds) != 1 || cmds[0].Type != tc.wantType {
				t.Fatalf("accepted %+v, want one %s", cmds, tc.wantType)
			}
		})
	}
}

func decisionForm(csrf, mission, revision, decision, comment string) url.Values {
	return url.Values{"csrf": {csrf}, "mission": {mission}, "revision": {revision}, "decision": {decision}, "comment": {comment}}
}

func TestNonLoopbackHostIsRefused(t *testing.T) {
	f := newPageFixture(t)
	req, _ := http.NewRequest(http.MethodGet, f.ts.URL+"/", nil)
	req.Host = "attacker.example:80"
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || strings.Contains(string(body), "csrf") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	for _, h := range []string{"127.0.0.1:8080", "localhost:1", "[::1]:9", "127.0.0.1"} {
		if !loopbackHost(h) {
			t.Errorf("%s refused", h)
		}
	}
	for _, h := range []string{"10.0.0.1:80", "example.com", "127.0.0.1.nip.io:80", ""} {
		if loopbackHost(h) {
			t.Errorf("%s accepted", h)
		}
	}
}

func TestArtifactDownloads(t *testing.T) {
	f := newPageFixture(t)
	diff, html, bin := f.a.Artifacts[0], f.a.Artifacts[1], f.a.Artifacts[2]
	tests := []struct {
		name, path, wantType, wantDisposition, wantBody string
		wantStatus                                      int
	}{
		{"diff is inline text", "/artifacts/" + diff.ContentHash, "text/x-diff", "inline", "--- a/x.go\n+++ b/x.go\n", 200},
		{"html is an attachment", "/artifacts/" + html.ContentHash, "text/html", "attachment", "<script>alert(1)</script>", 200},
		{"binary is an attachment", "/artifacts/" + bin.ContentHash, "application/octet-stream", "attachment", "\x00\x01\x02", 200},
		{"not listed by a pending mission", "/artifacts/" + protocol.Digest([]byte("other")), "", "", "", 404},
		{"not a digest", "/artifacts/sha256:XYZ", "", "", "", 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.get(t, tc.path)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, body)
			}
			if tc.wantStatus != 200 {
				return
			}
			h := resp.Header
			if h.Get("Content-Type") != tc.wantType || !strings.HasPrefix(h.Get("Content-Disposition"), tc.wantDisposition+";") || body != tc.wantBody {
				t.Errorf("type %q disposition %q body %q", h.Get("Content-Type"), h.Get("Content-Disposition"), body)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
				t.Errorf("headers %v", h)
			}
		})
	}
	t.Run("tampered bytes are refused", func(t *testing.T) {
		f.auth.corrupt(diff.ContentHash)
		resp, body := f.get(t, "/artifacts/"+diff.ContentHash)
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "+++") {
			t.Fatalf("status %d body %q", resp.StatusCode, body)
		}
	})
}

func TestArtifactContentTypeAndName(t *testing.T) {
	tests := []struct {
		in, want string
		inline   bool
	}{
		{"text/plain; charset=utf-8", "text/plain; charset=utf-8", true},
		{"text/markdown", "text/markdown", true},
		{"text/html", "text/html", false},
		{"image/svg+xml", "image/svg+xml", false},
		{"not a type", "application/octet-stream", false},
		{"", "application/octet-stream", false},
	}
	for _, tc := range tests {
		if got, inline := artifactContentType(tc.in); got != tc.want || inline != tc.inline {
			t.Errorf("artifactContentType(%q) = %q, %v; want %q, %v", tc.in, got, inline, tc.want, tc.inline)
		}
	}
	m := protocol.ArtifactManifest{ContentHash: "sha256:" + strings.Repeat("ab", 32), MediaType: "text/x-diff", WorkItemID: "wi-3"}
	if got := artifactFileName(m); got != "wi-3-abababababab.diff" {
		t.Errorf("name %q", got)
	}
	m.WorkItemID = "../../etc/passwd"
	if got := artifactFileName(m); got != "abababababab.diff" {
		t.Errorf("name from a hostile work item id: %q", got)
	}
}

func TestListenLocal(t *testing.T) {
	f := newPageFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	u, err := f.srv.ListenLocal(ctx, ":0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("url %s", u)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	cancel()
	f.srv.Wait()
	if _, err := http.Get(u); err == nil {
		t.Error("page still served after its context ended")
	}
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.168.1.1:0", "nonsense"} {
		if _, err := f.srv.ListenLocal(context.Background(), addr); err == nil {
			t.Errorf("ListenLocal(%q) accepted", addr)
		}
	}
}
