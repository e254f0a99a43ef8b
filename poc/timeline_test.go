package poc

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// faultedReport is sampleReport with two faults injected, an idle slot and
// a long idle wait for the human before the last decision.
func faultedReport() *Report {
	r := sampleReport()
	r.Slots = append(r.Slots, SlotUsage{Worker: "worker-2", Slot: 0})
	r.Injections = []Injection{
		{Fault: FaultLeaseExpiry, At: at(10), Worker: "worker-1", Group: "grp-a", WorkItem: "wi-a3"},
		{Fault: FaultDuplicateDelivery, At: at(10.2), Worker: "worker-1", Group: "grp-b"},
	}
	r.Approvals = append(r.Approvals, ApprovalMoment{Mission: "mis-b", Group: "grp-b", At: at(60), Decision: "approved"})
	return r
}

func TestTimelineGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderTimeline(&buf, faultedReport()); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "timeline.golden.svg")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./poc -run TestTimelineGolden -update)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("timeline differs from %s (rerun with -update after checking the picture)\n%s", golden, buf.String())
	}
	// Rendering twice gives the same bytes (no map order leaks).
	for range 5 {
		var again bytes.Buffer
		_ = RenderTimeline(&again, faultedReport())
		if !bytes.Equal(again.Bytes(), want) {
			t.Fatal("rendering is not deterministic")
		}
	}
}

func TestTimelineContent(t *testing.T) {
	r := sampleReport()
	r.Slots[0].Intervals[0].Item = `<wi "a1"> & more` + "\x1b"
	var buf bytes.Buffer
	if err := RenderTimeline(&buf, r); err != nil {
		t.Fatal(err)
	}
	svg := buf.String()
	wellFormed(t, svg)
	counts := map[string]int{
		`<title>preempted</title>`:     1, // wi-b1 on slot 0
		`<title>lease_expired</title>`: 1, // wi-a3 on slot 1
		`stroke-dasharray="5 3"`:       2, // two human decisions
		`fill="#0072B2" fill-opacity`:  3, // grp-a runs in the first colour
		`fill="#E69F00" fill-opacity`:  3, // grp-b runs in the second
		`worker-1 / slot `:             2,
	}
	for s, n := range counts {
		if got := strings.Count(svg, s); got != n {
			t.Errorf("%q appears %d times, want %d", s, got, n)
		}
	}
	if !strings.Contains(svg, "&lt;wi &#34;a1&#34;&gt; &amp; more") || strings.ContainsRune(svg, 0x1b) {
		t.Error("item names are not escaped")
	}
	for _, want := range []string{"mis-a changes_requested", "mis-a approved", "grp-a: weight 2 (66.7% of weights), 61.1% of slot-time"} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}

func TestTimelineEmptyAndWrite(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderTimeline(&buf, &Report{}); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, buf.String())

	dir := t.TempDir()
	path := filepath.Join(dir, "timeline.svg")
	if err := WriteTimeline(path, sampleReport()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	_ = RenderTimeline(&buf, sampleReport())
	if !bytes.Equal(got, buf.Bytes()) {
		t.Error("written file differs from the rendering")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := WriteTimeline(filepath.Join(dir, "missing", "t.svg"), sampleReport()); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

// TestTimelineMarksFaultsStallsAndIdle: every fault is named where it
// happened, the stalled run is hatched from the injection on, every slot has
// a row, bars carry their stage, and the idle wait is a labelled break that
// leaves the work most of the width.
func TestTimelineMarksFaultsStallsAndIdle(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderTimeline(&buf, faultedReport()); err != nil {
		t.Fatal(err)
	}
	svg := buf.String()
	wellFormed(t, svg)
	for s, n := range map[string]int{
		`1 lease-expiry +10.0s`:                1,
		`2 duplicate-delivery +10.2s`:          1,
		`fill="url(#stall)"`:                   1,
		`worker-2 / slot 0`:                    1,
		`font-size="10">implementation</text>`: 3,
		` idle</text>`:                         1,
	} {
		if got := strings.Count(svg, s); got != n {
			t.Errorf("%q appears %d times, want %d", s, got, n)
		}
	}
	if !strings.Contains(svg, ">47.3s idle</text>") {
		t.Error("the wait for the human is not drawn as a 47.3 s break (the 48 s less the margins of 1 percent of the span kept around each moment)")
	}
	// The 12 s of work get all but the break's width, not 12/60 of it.
	ax := newAxis(at(0).Time, at(60).Time, [][2]time.Time{{at(0).Time, at(12).Time}}, nil, 0, 1000)
	if x := ax.x(at(12).Time); x < 1000-tlBreakW-1 {
		t.Errorf("the end of the work is drawn at %.1f of 1000", x)
	}
}

// Notes under the plot fit the width, wrapped between their parts.
func TestTimelineNotesWrap(t *testing.T) {
	var parts []string
	for i := range 40 {
		parts = append(parts, fmt.Sprintf("stage number %d +%d.0s–%d.5s", i, i, i))
	}
	lines := wrapNote(strings.Join(parts, " · "), "#000", "")
	if len(lines) < 2 {
		t.Fatalf("not wrapped: %+v", lines)
	}
	for i, l := range lines {
		if n := len([]rune(l.text)); n > tlNoteChars || l.cont != (i > 0) || strings.HasPrefix(l.text, "·") || strings.HasSuffix(l.text, "·") {
			t.Errorf("line %d (%d chars): %q", i, n, l.text)
		}
	}
	m := MissionReport{ID: "mis-a", Stages: []StageReport{{Name: "testing", StartedAt: ptrTime(0), FinishedAt: ptrTime(1)},
		{Name: "load 1", StartedAt: ptrTime(2), FinishedAt: ptrTime(3)}, {Name: "load 2", StartedAt: ptrTime(1.5), FinishedAt: ptrTime(4)},
		{Name: "integration"}}}
	off := func(x time.Time) string { return "+" + fmtSpan(x.Sub(t0)) }
	if got, want := stageList(m, off), "testing +0.0s–1.0s · load 1–2 +1.5s–4.0s · integration not run"; got != want {
		t.Errorf("stage list %q, want %q", got, want)
	}
}

func TestAxisKeepsShortGaps(t *testing.T) {
	ax := newAxis(at(0).Time, at(10).Time, [][2]time.Time{{at(0).Time, at(4).Time}, {at(4.5).Time, at(10).Time}}, nil, 0, 1000)
	for _, s := range ax.segs {
		if s.idle {
			t.Fatalf("a 0.5 s gap of a 10 s run was compressed: %+v", ax.segs)
		}
	}
	if x := ax.x(at(5).Time); x != 500 {
		t.Errorf("x(5s) = %v, want 500 on a proportional axis", x)
	}
}

func TestTickStep(t *testing.T) {
	for _, c := range []struct{ span, want time.Duration }{
		{time.Second, 200 * time.Millisecond},
		{12 * time.Second, 2 * time.Second},
		{3 * time.Minute, 30 * time.Second},
		{100 * time.Hour, 100 * time.Hour / tlMaxTicks},
	} {
		if got := tickStep(c.span); got != c.want {
			t.Errorf("tickStep(%s) = %s, want %s", c.span, got, c.want)
		}
	}
}

func wellFormed(t *testing.T, doc string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("svg is not well-formed XML: %v", err)
		}
	}
}
