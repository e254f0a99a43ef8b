package poc

import (
	"context"
	"mime"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/missionweave/mwp-worker/protocol"
)

// maxInlineBytes bounds how much of one artifact the page shows inline;
// the rest is one click away (the artifact link).
const maxInlineBytes = 64 << 10

// missionReview is one pending Mission as the page lays it out for a
// reviewer: the decision first, then what was done (the final change, each
// stage's text outputs), then the evidence once per stage with its methods
// as columns, then the budgets.
type missionReview struct {
	PendingMission
	// Changes are the diffs, the last one first (the final change).
	Changes []inlineArtifact
	// Outputs are the other text outputs, in stage order; LoadOutputs the
	// load and soak stages' reports, shown behind one line (dozens of
	// alike SHA-256 chains the coordinator recomputed).
	Outputs     []inlineArtifact
	LoadOutputs []inlineArtifact
	Methods     []string
	Rows        []evidenceRow
	Budgets     []budgetLine
}

type inlineArtifact struct {
	Manifest  protocol.ArtifactManifest
	Text      string
	Truncated bool
	// Lines is Text split for colouring when the artifact is a diff.
	Lines []diffLine
	// Problem says why the bytes are not shown (they failed their
	// manifest's hash or size, or could not be read).
	Problem string
}

type evidenceRow struct {
	Subject string
	Cells   []evidenceCell // one per missionReview.Methods
}

type evidenceCell struct {
	Present   bool
	Result    protocol.EvidenceResult
	Detail    string // producer, time, criteria: the cell's tooltip
	Artifacts []string
}

type budgetLine struct {
	Dimension string
	Used, Cap string
	Over      bool
}

// reviewOf lays out p. Artifact bytes are fetched and checked against their
// manifests here; a mismatch is shown, never the bytes.
func reviewOf(ctx context.Context, src ApprovalSource, p PendingMission) missionReview {
	r := missionReview{PendingMission: p}
	r.Methods, r.Rows = evidenceMatrix(p.Evidence)
	for _, m := range stageOrder(p) {
		if !inlineText(m.MediaType) {
			continue
		}
		a := inlineArtifact{Manifest: m}
		data, err := FetchArtifact(ctx, src, m)
		switch {
		case err != nil:
			a.Problem = string(protocol.CodeOf(err)) + ": " + err.Error()
		case !utf8.Valid(data):
			a.Problem = "not UTF-8 text; use the link"
		default:
			a.Text, a.Truncated = clip(data)
		}
		if isDiff(m.MediaType) {
			a.Lines = diffLines(a.Text)
			r.Changes = append(r.Changes, a)
		} else if loadItem.MatchString(m.WorkItemID) {
			r.LoadOutputs = append(r.LoadOutputs, a)
		} else {
			r.Outputs = append(r.Outputs, a)
		}
	}
	slices.Reverse(r.Changes)
	r.Budgets = budgetLines(p.Used, p.Budgets)
	return r
}

// loadItem matches the WorkItems of load and soak stages (loadStages and
// MissionA name them).
var loadItem = regexp.MustCompile(`-(load|soak)-[0-9]+$`)

// stageOrder is the artifacts in the order their stages first appear in the
// evidence (the coordinator submits it in stage order), the rest after.
func stageOrder(p PendingMission) []protocol.ArtifactManifest {
	rank := map[string]int{}
	for _, e := range p.Evidence {
		if _, ok := rank[e.Subject]; !ok {
			rank[e.Subject] = len(rank)
		}
	}
	out := slices.Clone(p.Artifacts)
	slices.SortStableFunc(out, func(a, b protocol.ArtifactManifest) int {
		ra, oka := rank[a.WorkItemID]
		rb, okb := rank[b.WorkItemID]
		switch {
		case oka && okb:
			return ra - rb
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
	return out
}

// evidenceMatrix puts each subject on one row and each method in one
// column; of two records for the same cell the later one stands (a change
// request's second round replaces the first).
func evidenceMatrix(evs []protocol.Evidence) ([]string, []evidenceRow) {
	var methods, subjects []string
	cells := map[[2]string]protocol.Evidence{}
	for _, e := range evs {
		if !slices.Contains(methods, e.Method) {
			methods = append(methods, e.Method)
		}
		if !slices.Contains(subjects, e.Subject) {
			subjects = append(subjects, e.Subject)
		}
		k := [2]string{e.Subject, e.Method}
		if old, ok := cells[k]; !ok || !e.Timestamp.Time.Before(old.Timestamp.Time) {
			cells[k] = e
		}
	}
	rows := make([]evidenceRow, 0, len(subjects))
	for _, s := range subjects {
		row := evidenceRow{Subject: s, Cells: make([]evidenceCell, len(methods))}
		for i, m := range methods {
			e, ok := cells[[2]string{s, m}]
			if !ok {
				continue
			}
			row.Cells[i] = evidenceCell{Present: true, Result: e.Result, Artifacts: e.Artifacts,
				Detail: string(e.Producer.Kind) + ":" + e.Producer.ID + " at " + protocol.NewTime(e.Timestamp.Time).String() + "; criteria " + strings.Join(e.Criteria, ", ")}
		}
		rows = append(rows, row)
	}
	return methods, rows
}

// budgetLines lists every dimension that has a cap or was used.
func budgetLines(used protocol.Usage, caps *protocol.Budgets) []budgetLine {
	var c protocol.Budgets
	if caps != nil {
		c = *caps
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	var out []budgetLine
	addF := func(name string, used float64, limit *float64) {
		if limit == nil && used == 0 {
			return
		}
		l := budgetLine{Dimension: name, Used: f(used), Cap: "none"}
		if limit != nil {
			l.Cap, l.Over = f(*limit), used > *limit
		}
		out = append(out, l)
	}
	addU := func(name string, used uint64, limit *uint64) {
		if limit == nil && used == 0 {
			return
		}
		l := budgetLine{Dimension: name, Used: u(used), Cap: "none"}
		if limit != nil {
			l.Cap, l.Over = u(*limit), used > *limit
		}
		out = append(out, l)
	}
	addF("money", used.Money, c.Money)
	addU("tokens", used.Tokens, c.Tokens)
	addU("toolCalls", used.ToolCalls, c.ToolCalls)
	addF("computeSeconds", used.ComputeSeconds, c.ComputeSeconds)
	addF("wallClockSeconds", used.WallClockSeconds, c.WallClockSeconds)
	addU("sideEffects", used.SideEffects, c.SideEffects)
	return out
}

func clip(data []byte) (string, bool) {
	if len(data) <= maxInlineBytes {
		return string(data), false
	}
	cut := maxInlineBytes
	for cut > 0 && !utf8.RuneStart(data[cut]) {
		cut--
	}
	return string(data[:cut]), true
}

// inlineText reports whether the page shows an artifact of this media type
// as text: the types artifactContentType serves inline, and JSON.
func inlineText(mediaType string) bool {
	if _, inline := artifactContentType(mediaType); inline {
		return true
	}
	mt, _, err := mime.ParseMediaType(mediaType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func isDiff(mediaType string) bool {
	mt, _, _ := mime.ParseMediaType(mediaType)
	return mt == "text/x-diff" || mt == "text/x-patch"
}

type diffLine struct{ Class, Text string }

// diffLines classes each line of a unified diff for the page's colours.
func diffLines(text string) []diffLine {
	var out []diffLine
	for line := range strings.Lines(text) {
		c := ""
		switch {
		case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
			c = "file"
		case strings.HasPrefix(line, "@@"):
			c = "hunk"
		case strings.HasPrefix(line, "+"):
			c = "add"
		case strings.HasPrefix(line, "-"):
			c = "del"
		}
		out = append(out, diffLine{Class: c, Text: strings.TrimSuffix(line, "\n")})
	}
	return out
}
