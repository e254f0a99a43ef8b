package poc

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestTimelineGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderTimeline(&buf, sampleReport()); err != nil {
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
		_ = RenderTimeline(&again, sampleReport())
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
