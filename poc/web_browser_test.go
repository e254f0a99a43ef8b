package poc

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// findChromium returns the first browser binary on PATH, or "".
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestApprovalPageInBrowser clicks Approve on one Mission and Request
// changes (typing the changes) on another in headless Chromium, then checks
// the signed Commands the fake authority verified and accepted.
func TestApprovalPageInBrowser(t *testing.T) {
	bin := findChromium()
	if bin == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH")
	}
	clk := clock.NewFake(t0)
	auth, approver := newFakeAuthority(t, clk)
	auth.addMission("mis-a", "grp-a", 7, scriptEvidence, [2]string{"text/x-diff", "+fix\n"})
	auth.addMission("mis-b", "grp-b", 4, "integration tests pass")
	// As many evidence records as a real Mission submits: five stages,
	// three review steps each.
	auth.mu.Lock()
	a := auth.missions["mis-a"]
	for _, st := range []string{"requirements", "implementation", "testing", "code-review", "integration"} {
		for _, m := range []string{"coordinator review: integrity", "coordinator review: checks", "coordinator review: semantic"} {
			a.Evidence = append(a.Evidence, ev("mis-a:"+st, m, protocol.EvidencePass, 0))
		}
	}
	auth.missions["mis-a"] = a
	auth.mu.Unlock()
	srv := NewApprovalServer(auth, approver, clk, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srvCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); srv.Wait() }()
	url, err := srv.ListenLocal(srvCtx, ":0")
	if err != nil {
		t.Fatal(err)
	}

	// The flags keep Chromium off the network (this machine has none) and
	// out of the user's profile.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()

	step := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("browser: text of %s: %v", sel, err)
		}
		return s
	}
	outcome := func() string {
		t.Helper()
		a, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS("#result"), "data-outcome"))
		if err != nil {
			t.Fatalf("browser: outcome: %v", err)
		}
		return a.Value
	}

	step("open the page", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#mission-mis-b")))
	saveShot(t, bctx, "approvals-before.png")
	// A reviewer sees the decision without scrolling: at 1280×800 both
	// buttons of the first Mission are inside the first screen.
	fold, err := chromedp.Run(bctx, chromedp.Evaluate[[]float64](`[
		document.querySelector("#approve-mis-a button[type=submit]").getBoundingClientRect().bottom,
		document.querySelector("#changes-mis-a button[type=submit]").getBoundingClientRect().bottom,
		window.innerHeight, window.innerWidth]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(fold) != 4 || fold[2] < 600 || fold[0] > fold[2] || fold[1] > fold[2] {
		t.Errorf("decision buttons end at %v px in a %v px high window; want them in the first screen", fold[:2], fold[2:])
	}
	// The script in the evidence must be text on the page, not code.
	hasScript, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelectorAll("script").length > 0`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text("#mission-mis-a .evidence"), `<script>alert("pwned")</script>`) {
		t.Error("the evidence text is not shown as text")
	}
	step("approve mis-a", chromedp.Click(chromedp.CSS("#approve-mis-a button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#result")))
	outcomeA, approveResult := outcome(), text("#result")
	step("back", chromedp.Click(chromedp.CSS("#back")), chromedp.WaitVisible(chromedp.CSS("#changes-mis-b textarea")))
	step("request changes on mis-b",
		chromedp.SendKeys(chromedp.CSS("#changes-mis-b textarea"), "add an integration test\nrename the flag"),
		chromedp.Click(chromedp.CSS("#changes-mis-b button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#result")))
	outcomeB, changesResult := outcome(), text("#result")
	step("back to an empty list", chromedp.Click(chromedp.CSS("#back")), chromedp.WaitVisible(chromedp.CSS("#no-missions")))
	saveShot(t, bctx, "approvals-after.png")
	if hasScript {
		t.Error("the page carries a script element")
	}
	if outcomeA != "accepted" || !strings.Contains(approveResult, "mission.approve") || !strings.Contains(approveResult, "evt-41") {
		t.Errorf("approve result %q: %q", outcomeA, approveResult)
	}
	if outcomeB != "accepted" || !strings.Contains(changesResult, "mission.request_changes") || !strings.Contains(changesResult, "evt-42") {
		t.Errorf("request changes result %q: %q", outcomeB, changesResult)
	}

	cmds := auth.commands()
	if len(cmds) != 2 {
		t.Fatalf("authority accepted %d commands, want 2", len(cmds))
	}
	check := func(c *protocol.Command, typ protocol.CommandType, group string, rev uint64) {
		t.Helper()
		if c.Type != typ || c.GroupID != group || c.ExpectedRevision == nil || *c.ExpectedRevision != rev ||
			c.Actor != approver.Human || c.MembershipEpoch == nil || *c.MembershipEpoch != 3 || c.Signature.KeyID != "human:alice#k1" {
			t.Errorf("command %+v", c)
		}
	}
	check(cmds[0], protocol.CmdMissionApprove, "grp-a", 7)
	check(cmds[1], protocol.CmdMissionRequestChanges, "grp-b", 4)
	var ap protocol.ApproveMissionPayload
	var rc protocol.RequestChangesPayload
	if err := json.Unmarshal(cmds[0].Payload, &ap); err != nil || ap.MissionID != "mis-a" || ap.ApprovalID == "" {
		t.Errorf("approve payload %s (%v)", cmds[0].Payload, err)
	}
	if err := json.Unmarshal(cmds[1].Payload, &rc); err != nil || rc.MissionID != "mis-b" ||
		strings.Join(rc.Changes, "|") != "add an integration test|rename the flag" {
		t.Errorf("request changes payload %s (%v)", cmds[1].Payload, err)
	}
	// The fake verified each signature before accepting; verify the exact
	// bytes again here so this test does not rest on the fake alone.
	auth.mu.Lock()
	raws := auth.rawSeen
	auth.mu.Unlock()
	for _, raw := range raws {
		in := protocol.Inbound{Keys: protocol.NewKeySet(approver.Key.Public())}
		if _, err := in.DecodeCommand(raw, clk.Now()); err != nil {
			t.Errorf("signed command does not verify: %v", err)
		}
	}
}

// saveShot writes a screenshot to $MWP_SCREENSHOT_DIR when it is set, for a
// person to look at the page.
func saveShot(t *testing.T, bctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("MWP_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTimelineInBrowser renders a timeline with faults, decisions and an
// idle break in headless Chromium and checks that no two labels overlap.
func TestTimelineInBrowser(t *testing.T) {
	bin := findChromium()
	if bin == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH")
	}
	path := filepath.Join(t.TempDir(), "timeline.svg")
	if err := WriteTimeline(path, faultedReport()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1000, 400),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate("file://"+path), chromedp.WaitVisible(chromedp.CSS("svg"))); err != nil {
		t.Fatal(err)
	}
	saveShot(t, bctx, "timeline.png")
	overlaps, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(() => {
		const boxes = [...document.querySelectorAll("text")].map(e => [e.textContent, e.getBBox()]);
		const out = [];
		for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
			const [a, p] = boxes[i], [b, q] = boxes[j];
			if (p.x < q.x + q.width && q.x < p.x + p.width && p.y < q.y + q.height && q.y < p.y + p.height) out.push(a + " / " + b);
		}
		return out;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if len(overlaps) > 0 {
		t.Errorf("overlapping labels: %q", overlaps)
	}
}
