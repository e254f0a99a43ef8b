package poc

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/slots"
)

// rigItem is the WorkItem handlerRig.start runs for kind: the last stage
// of that kind in Mission A.
func rigItem(kind StageKind) string {
	id := ""
	for _, st := range MissionA(base).WorkStages() {
		if st.Kind == kind {
			id = st.WorkItemID
		}
	}
	return id
}

func installPython(t *testing.T) *PythonStages {
	t.Helper()
	py, err := InstallPythonStages(t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { py.Close() })
	return py
}

// criteria lists an outcome's Evidence as criterion=result.
func criteria(o slots.Outcome) []string {
	var out []string
	for _, e := range o.Result.Evidence {
		out = append(out, strings.Join(e.Criteria, ",")+"="+string(e.Result))
	}
	slices.Sort(out)
	return out
}

// The Python stages do what their Go twins do, reading their inputs with
// fetch: the same requirements note, patch and load report, byte for
// byte, the same test report and integration effect, and the same verdict
// on the review, with one passing Evidence per criterion.
func TestPythonStagesMatchGo(t *testing.T) {
	py := installPython(t)
	g := newHandlerRig(t)
	p := newHandlerRigPython(t, nil, nil, py)
	p.host.arts = g.host.arts // one artifact store; the runs are sequential
	req := g.host.put(FeatureRequest(MissionA(base).Feature))
	in := map[string]string{OutFeatureRequest: req}
	goReq, pyReq := g.run(StageRequirements, "lease-r", 1, in), p.run(StageRequirements, "lease-pr", 1, in)
	if !passed(goReq) || !passed(pyReq) || !slices.Equal(criteria(goReq), criteria(pyReq)) {
		t.Fatalf("requirements: go %v %s, python %v %s", criteria(goReq), goReq.Reason, criteria(pyReq), pyReq.Reason)
	}
	if goNote, pyNote := g.artifact(goReq, "#"), p.artifact(pyReq, "#"); !bytes.Equal(goNote, pyNote) {
		t.Fatalf("the notes differ:\ngo:\n%s\npython:\n%s", goNote, pyNote)
	}
	in = map[string]string{OutRequirements: pyReq.Result.Artifacts[0]}
	goImpl, pyImpl := g.run(StageImplementation, "lease-i", 1, in), p.run(StageImplementation, "lease-pi", 1, in)
	if !passed(goImpl) || !passed(pyImpl) || !slices.Equal(criteria(goImpl), criteria(pyImpl)) {
		t.Fatalf("implementation: go %v %s, python %v %s", criteria(goImpl), goImpl.Reason, criteria(pyImpl), pyImpl.Reason)
	}
	if a, b := g.artifact(goImpl, "---"), p.artifact(pyImpl, "---"); !bytes.Equal(a, b) {
		t.Fatalf("the patches differ:\ngo:\n%s\npython:\n%s", a, b)
	}
	patch := pyImpl.Result.Artifacts[0]
	in = map[string]string{OutPatch: patch}
	goTest, test := g.run(StageTesting, "lease-t", 1, in), p.run(StageTesting, "lease-pt", 1, in)
	if !passed(goTest) || !passed(test) {
		t.Fatalf("testing: go %v %s, python %v %s", criteria(goTest), goTest.Reason, criteria(test), test.Reason)
	}
	var goRep, pyRep TestReport
	mustJSON(t, g.artifact(goTest, "{"), &goRep)
	mustJSON(t, p.artifact(test, "{"), &pyRep)
	goRep.Output, pyRep.Output = "", ""
	if goRep != pyRep {
		t.Fatalf("the test reports differ: go %+v, python %+v", goRep, pyRep)
	}
	// Each rig has its own integration repository, from the same baseline.
	in = map[string]string{OutPatch: patch}
	goInt, pyInt := g.run(StageIntegration, "lease-g", 1, in), p.run(StageIntegration, "lease-pg", 1, in)
	if !passed(goInt) || !passed(pyInt) {
		t.Fatalf("integration: go %v %s, python %v %s", criteria(goInt), goInt.Reason, criteria(pyInt), pyInt.Reason)
	}
	var goRc, pyRc Receipt
	mustJSON(t, g.artifact(goInt, "{"), &goRc)
	mustJSON(t, p.artifact(pyInt, "{"), &pyRc)
	if pyRc.Commit != goRc.Commit || !slices.Equal(pyRc.Files, goRc.Files) || pyRc.PatchDigest != patch || pyRc.Key == "" {
		t.Fatalf("receipts: go %+v, python %+v", goRc, pyRc)
	}
	if recs, err := p.eff.Records(); err != nil || len(recs.Effects) != 1 || recs.Effects[0].Key != pyRc.Key {
		t.Fatalf("the Python stage's effects: %+v %v", recs.Effects, err)
	}
	in = map[string]string{OutPatch: patch, OutTestReport: test.Result.Artifacts[0]}
	goRev, pyRev := g.run(StageReview, "lease-v", 1, in), p.run(StageReview, "lease-pv", 1, in)
	if !passed(goRev) || !passed(pyRev) || !slices.Equal(criteria(goRev), criteria(pyRev)) {
		t.Fatalf("review: go %v, python %v %s", criteria(goRev), criteria(pyRev), pyRev.Reason)
	}
	notes := string(p.artifact(pyRev, "#"))
	for _, f := range []string{"CHANGELOG.md", "calc/clamp.go", "calc/clamp_test.go"} {
		if !strings.Contains(notes, "`"+f+"`") {
			t.Errorf("the Python review notes omit %s:\n%s", f, notes)
		}
	}
	in = map[string]string{OutPatch: patch}
	goLoad, pyLoad := g.run(StageLoad, "lease-l", 1, in), p.run(StageLoad, "lease-pl", 1, in)
	if !passed(goLoad) || !passed(pyLoad) {
		t.Fatalf("load: go %v, python %v %s", criteria(goLoad), criteria(pyLoad), pyLoad.Reason)
	}
	if a, b := g.artifact(goLoad, "{"), p.artifact(pyLoad, "{"); !bytes.Equal(a, b) {
		t.Fatalf("the load reports differ:\ngo     %s\npython %s", a, b)
	}
	if problems := checkLoad(p.artifact(pyLoad, "{"), rigItem(StageLoad), patch, false); problems != nil {
		t.Fatal(problems)
	}
}

// The Python reviewer blocks what the Go one blocks, and the requirements
// stage refuses a feature request it cannot read back, permanently.
func TestPythonStagesRefuse(t *testing.T) {
	py := installPython(t)
	p := newHandlerRigPython(t, nil, nil, py)
	// A new Go file, not gofmt-clean, with a TODO and no test.
	bad := p.host.put([]byte("--- /dev/null\n+++ b/calc/x.go\n@@ -0,0 +1,2 @@\n+package calc\n+func  X() {} // TODO later\n"))
	report := func(r TestReport) string {
		raw, _ := json.Marshal(r)
		return p.host.put(raw)
	}
	cases := []struct {
		name   string
		patch  string
		report TestReport
		rules  []string // in the notes
	}{
		{name: "todo, no test, not gofmt-clean", patch: bad, report: TestReport{Patch: bad, Applied: true, Passed: true},
			rules: []string{"blocking no-todo", "blocking tests-touched", "blocking gofmt"}},
		{name: "tests failed and patch not applied", patch: bad, report: TestReport{Patch: bad},
			rules: []string{"blocking patch-applies", "blocking tests-pass"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if py.Gofmt == "" {
				tc.rules = slices.DeleteFunc(tc.rules, func(r string) bool { return r == "blocking gofmt" })
			}
			o := p.run(StageReview, "lease-b"+string(rune('0'+i)), uint64(i+1), map[string]string{OutPatch: tc.patch, OutTestReport: report(tc.report)})
			if o.Kind != slots.Completed || passed(o) {
				t.Fatalf("a bad patch passed review: %v %s", criteria(o), o.Reason)
			}
			notes := string(p.artifact(o, "#"))
			for _, r := range tc.rules {
				if !strings.Contains(notes, r) {
					t.Errorf("the notes lack %q:\n%s", r, notes)
				}
			}
		})
	}
	t.Run("a report for another patch", func(t *testing.T) {
		other := p.host.put([]byte("not the patch"))
		o := p.run(StageReview, "lease-bo", 9, map[string]string{OutPatch: bad, OutTestReport: report(TestReport{Patch: other, Applied: true, Passed: true})})
		if o.Kind != slots.Failed || !strings.Contains(o.Reason, "not the patch under review") {
			t.Fatalf("outcome %v %q", o.Kind, o.Reason)
		}
	})
	t.Run("an unreadable feature request", func(t *testing.T) {
		req := p.host.put([]byte(`{"id":"f","extra":1}`))
		o := p.run(StageRequirements, "lease-rq", 1, map[string]string{OutFeatureRequest: req})
		if o.Kind != slots.Failed || o.Attempts != 1 || !strings.Contains(o.Reason, "members must be exactly") {
			t.Fatalf("outcome %v after %d attempts: %q", o.Kind, o.Attempts, o.Reason)
		}
	})
}

// A Python load stage asked to yield at a safe point checkpoints and
// yields; the next run resumes after the steps done and ends with the
// chain an unbroken run computes.
func TestPythonLoadPreemptResume(t *testing.T) {
	py := installPython(t)
	p := newHandlerRigPython(t, nil, nil, py)
	patch := p.host.put([]byte("the patch"))
	in := map[string]string{OutPatch: patch}
	p.host.preemptAt = loadStepLabel + "1"
	o := p.run(StageLoad, "lease-1", 1, in)
	if o.Kind != slots.Preempted || o.Checkpoint == nil || o.Checkpoint.Phase != loadStepLabel+"1" {
		t.Fatalf("outcome %v %q, checkpoint %+v", o.Kind, o.Reason, o.Checkpoint)
	}
	p.host.mu.Lock()
	p.host.phases = nil
	p.host.mu.Unlock()
	o = p.run(StageLoad, "lease-2", 2, in)
	if !passed(o) {
		t.Fatalf("resumed: %v %q", criteria(o), o.Reason)
	}
	p.host.mu.Lock()
	phases := strings.Join(p.host.phases, ",")
	p.host.mu.Unlock()
	want := []string{"read patch"}
	for i := 2; i <= LoadSteps; i++ {
		want = append(want, loadStepLabel+strconv.Itoa(i))
	}
	if want := strings.Join(append(want, "write load report"), ","); phases != want {
		t.Fatalf("the resumed run went through %s, want %s", phases, want)
	}
	var rep LoadReport
	mustJSON(t, p.artifact(o, "{"), &rep)
	item := rigItem(StageLoad)
	if want := LoadChain(item, patch, LoadSteps, LoadRounds); rep.Chain != want || rep.WorkItemID != item {
		t.Fatalf("report %+v, want chain %s", rep, want)
	}
}

// The report's handler language says what runs: a stage kind is "python"
// exactly when a Python handler serves its capability, every kind of both
// Missions is Python when gofmt is there, and all are Go without python3.
func TestHandlerLanguage(t *testing.T) {
	for _, gofmt := range []string{"/bin/gofmt", ""} {
		p := &PythonStages{Exe: "python3", Dir: t.TempDir(), Gofmt: gofmt}
		py := map[string]bool{}
		for _, h := range Handlers(HandlerConfig{AgentID: "agent", Python: p}) {
			_, isPy := h.(pyHandler)
			if py[h.Capability().ID] {
				t.Fatalf("two handlers serve %s", h.Capability().ID)
			}
			py[h.Capability().ID] = isPy
		}
		for _, k := range []StageKind{StageRequirements, StageImplementation, StageTesting, StageReview, StageIntegration, StageLoad, StageSoak} {
			want := "go"
			if py[templateFor(k, Feature{}).capability] {
				want = "python"
			}
			if got := HandlerLanguage(k, p); got != want {
				t.Errorf("%s: %s, a %s handler serves it", k, got, want)
			}
			if gofmt != "" && want != "python" {
				t.Errorf("%s: a Go handler with python3 and gofmt there", k)
			}
			if got := HandlerLanguage(k, nil); got != "go" {
				t.Errorf("%s without python3: %s", k, got)
			}
		}
		if gofmt == "" && HandlerLanguage(StageImplementation, p) != "go" {
			t.Error("the implementation is Python without gofmt to format its code")
		}
	}
}

// The Python implementation writes the Go twin's patch byte for byte for
// both Missions' features, from the feature request (a mission without a
// requirements stage) and for a rework on top of the verified patch with
// the human's changes.
func TestPythonImplementationMatchesGo(t *testing.T) {
	py := installPython(t)
	if py.Gofmt == "" {
		t.Skip("no gofmt: the implementation runs in Go")
	}
	g := newHandlerRig(t)
	p := newHandlerRigPython(t, nil, nil, py)
	p.host.arts = g.host.arts
	for i, f := range []Feature{MissionA(base).Feature, MissionB(base).Feature} {
		first, err := ImplementFeature(TinyProject(), f, nil)
		if err != nil {
			t.Fatal(err)
		}
		cr, _ := json.Marshal(ChangeRequest{Changes: []string{"name  the\tbounds", "say why"}})
		cases := map[string]map[string]string{
			"request": {OutFeatureRequest: g.host.put(FeatureRequest(f))},
			"rework": {OutFeatureRequest: g.host.put(FeatureRequest(f)), OutChangeRequest: g.host.put(cr),
				OutBasePatch: g.host.put([]byte(UnifiedDiff(TinyProject(), first)))},
		}
		for name, in := range cases {
			lease := strconv.Itoa(i) + name
			o, q := g.run(StageImplementation, "lease-g"+lease, 1, in), p.run(StageImplementation, "lease-p"+lease, 1, in)
			if !passed(o) || !passed(q) {
				t.Fatalf("%s %s: go %v %s, python %v %s", f.ID, name, criteria(o), o.Reason, criteria(q), q.Reason)
			}
			if a, b := g.artifact(o, "---"), p.artifact(q, "---"); !bytes.Equal(a, b) {
				t.Fatalf("%s %s: the patches differ:\ngo:\n%s\npython:\n%s", f.ID, name, a, b)
			}
		}
	}
}
