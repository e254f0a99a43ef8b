package poc

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

func ev(subject, method string, r protocol.EvidenceResult, at time.Duration) protocol.Evidence {
	return protocol.Evidence{Subject: subject, Criteria: []string{"ac-1"}, Method: method, Result: r,
		Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: "coord-a"}, Timestamp: protocol.NewTime(t0.Add(at))}
}

// TestEvidenceMatrix: one row per stage, one column per method, and of two
// records for one cell the later stands.
func TestEvidenceMatrix(t *testing.T) {
	methods, rows := evidenceMatrix([]protocol.Evidence{
		ev("wi-1", "integrity", protocol.EvidencePass, 0),
		ev("wi-1", "checks", protocol.EvidencePass, 0),
		ev("wi-2", "integrity", protocol.EvidencePass, 0),
		ev("wi-2", "checks", protocol.EvidenceFail, time.Second),
		ev("wi-2", "checks", protocol.EvidencePass, 2*time.Second),
		ev("wi-2", "semantic", protocol.EvidenceInconclusive, 0),
	})
	if strings.Join(methods, "|") != "integrity|checks|semantic" {
		t.Fatalf("methods %q", methods)
	}
	if len(rows) != 2 || rows[0].Subject != "wi-1" || rows[1].Subject != "wi-2" {
		t.Fatalf("rows %+v", rows)
	}
	got := func(r evidenceRow) string {
		var s []string
		for _, c := range r.Cells {
			if !c.Present {
				s = append(s, "-")
				continue
			}
			s = append(s, string(c.Result))
		}
		return strings.Join(s, " ")
	}
	if g := got(rows[0]); g != "pass pass -" {
		t.Errorf("wi-1 %q", g)
	}
	if g := got(rows[1]); g != "pass pass inconclusive" {
		t.Errorf("wi-2 %q (the later checks record must stand)", g)
	}
}

func TestBudgetLines(t *testing.T) {
	lines := budgetLines(protocol.Usage{Money: 2.5, ToolCalls: 12}, &protocol.Budgets{Money: protocol.Float64(2), SideEffects: protocol.Uint64(4)})
	var got []string
	for _, l := range lines {
		s := l.Dimension + "=" + l.Used + "/" + l.Cap
		if l.Over {
			s += "!"
		}
		got = append(got, s)
	}
	if want := "money=2.5/2! toolCalls=12/none sideEffects=0/4"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
}

// TestReviewShowsTheWorkInline: the final change and text outputs are on
// the page; bytes that fail their manifest are not, and the page says so.
func TestReviewShowsTheWorkInline(t *testing.T) {
	f := newPageFixture(t)
	p := f.a
	p.Artifacts = append(p.Artifacts, protocol.ArtifactManifest{ContentHash: protocol.Digest([]byte("other")), MediaType: "text/plain", WorkItemID: "wi-9", Size: 5})
	f.auth.artifacts[p.Artifacts[len(p.Artifacts)-1].ContentHash] = []byte("forged")
	r := reviewOf(context.Background(), f.auth, p)
	if len(r.Changes) != 1 || !strings.Contains(r.Changes[0].Text, "+++ b/x.go") {
		t.Fatalf("changes %+v", r.Changes)
	}
	if len(r.Outputs) != 1 || r.Outputs[0].Text != "" || !strings.Contains(r.Outputs[0].Problem, "SCHEMA_VALIDATION_FAILED") {
		t.Fatalf("outputs %+v: a forged artifact must show its problem, not its bytes", r.Outputs)
	}
	// Load and soak reports go behind one line.
	for _, id := range []string{"wi-a-load-1", "wi-a-load-2", "wi-a-soak-1"} {
		data := []byte(`{"chain":"` + id + `"}`)
		p.Artifacts = append(p.Artifacts, protocol.ArtifactManifest{ContentHash: protocol.Digest(data), MediaType: "application/json", WorkItemID: id, Size: uint64(len(data))})
		f.auth.artifacts[protocol.Digest(data)] = data
	}
	if r := reviewOf(context.Background(), f.auth, p); len(r.LoadOutputs) != 3 || len(r.Outputs) != 1 {
		t.Errorf("load outputs %d, outputs %d: want the three load and soak reports apart", len(r.LoadOutputs), len(r.Outputs))
	}
	for _, o := range append(r.Changes, r.Outputs...) {
		if strings.Contains(o.Manifest.MediaType, "html") || strings.Contains(o.Manifest.MediaType, "octet") {
			t.Errorf("%s shown inline", o.Manifest.MediaType)
		}
	}
}

func TestIndexLeadsWithTheDecision(t *testing.T) {
	f := newPageFixture(t)
	_, page := f.get(t, "/")
	if !strings.Contains(page, `id="waiting-count">2 Missions awaiting approval`) {
		t.Error("the page does not say how many Missions wait")
	}
	sec := page[strings.Index(page, `id="mission-mis-a"`):]
	form, diff, evidence := strings.Index(sec, `id="approve-mis-a"`), strings.Index(sec, `<pre class="text diff"><span class="file">--- a/x.go</span>`), strings.Index(sec, `class="evidence"`)
	if form < 0 || diff < 0 || evidence < 0 || !(form < diff && diff < evidence) {
		t.Errorf("order: decision %d, diff %d, evidence %d; want the decision first, then the change, then the evidence", form, diff, evidence)
	}
	// The method is a column header, not a cell repeated per row.
	if !strings.Contains(sec, "<th>go test ./...</th>") {
		t.Error("the evidence method is not a column")
	}
}

func TestResultSaysWhatStillWaits(t *testing.T) {
	f := newPageFixture(t)
	_, page := f.get(t, "/")
	_, body := f.post(t, decisionForm(csrfFrom(t, page), "mis-a", "7", "approve", ""))
	if !strings.Contains(body, `id="still-waiting"`) || !strings.Contains(body, "<code>mis-b</code>") || strings.Contains(body, "<code>mis-a</code>") {
		t.Errorf("after approving mis-a the page must list mis-b alone as waiting:\n%s", body)
	}
	_, page = f.get(t, "/")
	_, body = f.post(t, url.Values(decisionForm(csrfFrom(t, page), "mis-b", "4", "approve", "")))
	if !strings.Contains(body, `id="none-waiting"`) {
		t.Errorf("after the last decision the page must say nothing waits:\n%s", body)
	}
}
