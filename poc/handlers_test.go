package poc

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// memHost is a slots.Host over a map: artifacts are stored by digest and
// every progress phase is recorded. preemptAt names a phase at which the
// run of lease "lease-1" is asked to yield.
type memHost struct {
	mu        sync.Mutex
	pool      *slots.Pool
	arts      map[string][]byte
	phases    []string
	preemptAt string
	outcomes  chan slots.Outcome
}

func (h *memHost) Artifact(d string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.arts[d]
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "no artifact %s", d)
	}
	return b, nil
}

// ReadArtifact answers the fetch requests of the Python stages.
func (h *memHost) ReadArtifact(_ context.Context, _ slots.Slot, d string) ([]byte, error) {
	return h.Artifact(d)
}

func (h *memHost) put(b []byte) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := protocol.Digest(b)
	h.arts[d] = b
	return d
}

func (h *memHost) Progress(_ context.Context, s slots.Slot, p protocol.Progress) error {
	h.mu.Lock()
	h.phases = append(h.phases, p.Phase)
	pre := h.preemptAt != "" && p.Phase == h.preemptAt && s.LeaseID == "lease-1"
	h.mu.Unlock()
	if pre {
		return h.pool.Preempt(s.Index, s.LeaseID)
	}
	return nil
}

func (h *memHost) Checkpointed(context.Context, slots.Slot, checkpoint.Checkpoint) error { return nil }

func (h *memHost) PublishArtifact(_ context.Context, _ slots.Slot, a slots.Artifact) (string, error) {
	return h.put(a.Data), nil
}

func (h *memHost) Allow(context.Context, slots.Slot, slots.Risk) error { return nil }

func (h *memHost) Remaining(context.Context, slots.Slot) (protocol.Budgets, error) {
	return protocol.Budgets{}, nil
}

func (h *memHost) Finish(o slots.Outcome) { h.outcomes <- o }

// handlerRig runs the mission handlers in a real pool over a memHost.
type handlerRig struct {
	t    *testing.T
	host *memHost
	eff  *EffectLog
	dir  string
	py   *PythonStages // nil: the Go handlers
}

// rigMaker makes a rig of one handler language sharing eff (nil: a fresh
// integration repository) with the driver's holds (nil: none).
type rigMaker func(t *testing.T, eff *EffectLog, holds *Holds) *handlerRig

// eachLanguage runs fn for the Go handlers and for the Python stages
// (skipped without python3), as subtests named go and python.
func eachLanguage(t *testing.T, fn func(t *testing.T, lang string, rig rigMaker)) {
	t.Run("go", func(t *testing.T) {
		fn(t, "go", func(t *testing.T, eff *EffectLog, holds *Holds) *handlerRig {
			return newHandlerRigPython(t, eff, holds, nil)
		})
	})
	t.Run("python", func(t *testing.T) {
		py := installPython(t)
		fn(t, "python", func(t *testing.T, eff *EffectLog, holds *Holds) *handlerRig {
			return newHandlerRigPython(t, eff, holds, py)
		})
	})
}

func newHandlerRig(t *testing.T) *handlerRig { return newHandlerRigPython(t, nil, nil, nil) }

// newHandlerRigPython runs the handlers with the Python stages py (nil: the Go ones).
func newHandlerRigPython(t *testing.T, eff *EffectLog, holds *Holds, py *PythonStages) *handlerRig {
	t.Helper()
	dir := t.TempDir()
	h := &memHost{arts: map[string][]byte{}, outcomes: make(chan slots.Outcome, 4)}
	db, err := bolt.Open(filepath.Join(dir, "w.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := checkpoint.Open(db, filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	if eff == nil {
		eff, err = OpenEffectLog(filepath.Join(dir, EffectsFile), nil, TinyProject())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eff.Close() })
	}
	pool, err := slots.New(slots.Config{AgentID: "w1", Slots: 2, Host: h, Checkpoints: store, WorkRoot: dir, TickInterval: -1,
		Handlers: Handlers(HandlerConfig{AgentID: "w1", Artifacts: h, Integration: eff, Holds: holds, Python: py})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Shutdown(context.Background()) })
	h.pool = pool
	return &handlerRig{t: t, host: h, eff: eff, dir: dir, py: py}
}

// run runs stage s of Mission A with the named inputs under lease and
// returns the outcome.
func (r *handlerRig) run(kind StageKind, lease string, epoch uint64, inputs map[string]string) slots.Outcome {
	r.t.Helper()
	r.start(kind, lease, epoch, inputs)
	return r.wait(kind)
}

// start starts stage kind of Mission A in a slot; wait returns its outcome.
func (r *handlerRig) start(kind StageKind, lease string, epoch uint64, inputs map[string]string) int {
	r.t.Helper()
	var s Stage
	for _, st := range MissionA(base).WorkStages() {
		if st.Kind == kind {
			s = st
		}
	}
	c := s.Contract
	c.Inputs = nil
	for name, d := range inputs {
		c.Inputs = append(c.Inputs, protocol.InputRef{Artifact: d, Name: name})
	}
	slot, err := r.host.pool.Start(slots.Assignment{GroupID: "grp-a", MissionID: "mis-a", WorkItemID: s.WorkItemID, OwnershipEpoch: epoch,
		LeaseID: lease, LeaseExpiresAt: time.Now().Add(time.Hour), Contract: c})
	if err != nil {
		r.t.Fatal(err)
	}
	return slot
}

func (r *handlerRig) wait(kind StageKind) slots.Outcome {
	r.t.Helper()
	select {
	case o := <-r.host.outcomes:
		return o
	case <-time.After(30 * time.Second):
		r.t.Fatalf("%s did not finish", kind)
	}
	return slots.Outcome{}
}

func (r *handlerRig) artifact(o slots.Outcome, mediaPrefix string) []byte {
	r.t.Helper()
	for _, d := range o.Result.Artifacts {
		b, _ := r.host.Artifact(d)
		if strings.HasPrefix(string(b), mediaPrefix) {
			return b
		}
	}
	r.t.Fatalf("no artifact starting %q in %v", mediaPrefix, o.Result.Artifacts)
	return nil
}

func passed(o slots.Outcome) bool {
	if o.Kind != slots.Completed || len(o.Result.Evidence) == 0 {
		return false
	}
	for _, e := range o.Result.Evidence {
		if e.Result != protocol.EvidencePass {
			return false
		}
	}
	return true
}

// The whole chain on real files: the implementation's patch makes the tiny
// project's new test pass, and that test really checks the function.
func TestHandlersChain(t *testing.T) { eachLanguage(t, testHandlersChain) }

func testHandlersChain(t *testing.T, _ string, rig rigMaker) {
	r := rig(t, nil, nil)
	f := MissionA(base).Feature
	req := r.host.put(FeatureRequest(f))
	o := r.run(StageRequirements, "lease-r", 1, map[string]string{OutFeatureRequest: req})
	if !passed(o) || len(o.Result.Artifacts) != 1 {
		t.Fatalf("requirements: %+v", o)
	}
	note := o.Result.Artifacts[0]
	o = r.run(StageImplementation, "lease-i", 1, map[string]string{OutRequirements: note})
	if !passed(o) {
		t.Fatalf("implementation: %+v", o)
	}
	patchD := o.Result.Artifacts[0]
	patch, _ := r.host.Artifact(patchD)
	patched, _, err := ApplyPatch(TinyProject(), string(patch))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := patched.WriteTo(dir); err != nil {
		t.Fatal(err)
	}
	rep, err := RunGoTest(context.Background(), "", dir)
	if err != nil || !rep.Passed || rep.Tests != 1 {
		t.Fatalf("patched project: %v %+v", err, rep)
	}
	// A wrong body fails the patch's own test: the test is not vacuous.
	broken := patched.Clone()
	broken["calc/clamp.go"] = strings.Replace(broken["calc/clamp.go"], "return lo", "return hi", 1)
	bdir := t.TempDir()
	if err := broken.WriteTo(bdir); err != nil {
		t.Fatal(err)
	}
	if rep, err := RunGoTest(context.Background(), "", bdir); err != nil || rep.Passed || rep.ExitCode == 0 {
		t.Fatalf("broken clamp passed: %v %+v", err, rep)
	}

	o = r.run(StageTesting, "lease-t", 1, map[string]string{OutPatch: patchD})
	if !passed(o) {
		t.Fatalf("testing: %+v", o)
	}
	reportD := o.Result.Artifacts[0]
	o = r.run(StageReview, "lease-v", 1, map[string]string{OutPatch: patchD, OutTestReport: reportD})
	if !passed(o) {
		t.Fatalf("review: %+v", o)
	}
	notesD := o.Result.Artifacts[0]
	notes, _ := r.host.Artifact(notesD)
	for _, p := range []string{"CHANGELOG.md", "calc/clamp.go", "calc/clamp_test.go"} {
		if !strings.Contains(string(notes), "`"+p+"`") {
			t.Errorf("review notes omit %s:\n%s", p, notes)
		}
	}
	// Integration, then a rerun after reassignment (epoch 2): it resumes
	// from the finished checkpoint and submits the same receipt. Then
	// another worker without that checkpoint integrates the same patch
	// under its own key: the repository answers with the first effect.
	in := map[string]string{OutPatch: patchD, OutReviewNotes: notesD}
	first := r.run(StageIntegration, "lease-g1", 1, in)
	again := r.run(StageIntegration, "lease-g2", 2, in)
	other := rig(t, r.eff, nil)
	other.host.arts = r.host.arts
	third := other.run(StageIntegration, "lease-g3", 3, in)
	// Only keys protect the repository: the same patch under a new key
	// is tried again and refused as a conflict, never applied twice.
	if passed(third) || !strings.Contains(third.Reason, "does not apply") {
		t.Fatalf("integration under another key: %+v", third)
	}
	var rcs []Receipt
	for i, o := range []slots.Outcome{first, again} {
		if !passed(o) {
			t.Fatalf("integration %d: %+v", i, o)
		}
		var rc Receipt
		mustJSON(t, r.artifact(o, "{"), &rc)
		rcs = append(rcs, rc)
	}
	if rcs[0].Repeat || rcs[1].Key != rcs[0].Key || rcs[1].EffectSeq != 1 || rcs[1].Repeat {
		t.Fatalf("receipts %+v", rcs)
	}
	recs, err := r.eff.Records()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs.Effects) != 1 || len(recs.Requests) != 1 {
		t.Fatalf("effects %+v requests %+v", recs.Effects, recs.Requests)
	}
	repo, _ := r.eff.Repository()
	if repo["calc/clamp.go"] != patched["calc/clamp.go"] {
		t.Fatal("the integration repository does not hold the patched file")
	}
}

// A patch whose test fails, and one that does not apply, are reported as
// failures by the testing handler (a submission with failing evidence,
// which review then rejects).
func TestTestingHandlerReportsFailure(t *testing.T) {
	eachLanguage(t, testTestingHandlerReportsFailure)
}

func testTestingHandlerReportsFailure(t *testing.T, _ string, rig rigMaker) {
	r0 := rig(t, nil, nil)
	f := MissionA(base).Feature
	f.Cases = append(f.Cases, TestCase{Args: "7, 0, 5", Want: "7"}) // wrong: Clamp(7,0,5) is 5
	changed, err := ImplementFeature(TinyProject(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := r0.host.put([]byte(UnifiedDiff(TinyProject(), changed)))
	conflicting := r0.host.put([]byte("--- a/calc/calc.go\n+++ b/calc/calc.go\n@@ -1,1 +1,1 @@\n-package nope\n+package calc\n"))
	for name, d := range map[string]string{"failing test": bad, "conflict": conflicting} {
		t.Run(name, func(t *testing.T) {
			r := rig(t, nil, nil) // a fresh checkpoint store: no resume
			r.host.arts = r0.host.arts
			o := r.run(StageTesting, "lease-"+name, 1, map[string]string{OutPatch: d})
			if o.Kind != slots.Completed || len(o.Result.Evidence) != 1 || o.Result.Evidence[0].Result != protocol.EvidenceFail {
				t.Fatalf("outcome %+v", o)
			}
			var rep TestReport
			mustJSON(t, r.artifact(o, "{"), &rep)
			if rep.Passed || rep.Patch != d || (name == "conflict") == rep.Applied {
				t.Fatalf("report %+v", rep)
			}
			if name == "failing test" && !strings.Contains(rep.Output, "Clamp(7, 0, 5) = 5, want 7") {
				t.Fatalf("output does not show the failing case:\n%s", rep.Output)
			}
		})
	}
}

// Preempted at its first safe point, the implementation handler yields
// with a checkpoint; the next run resumes after it and does not redo it.
// The Go handler yields before the step whose progress asked it to, the
// Python one after that step (at the checkpoint that follows it).
func TestHandlerPreemptAndResume(t *testing.T) { eachLanguage(t, testHandlerPreemptAndResume) }

func testHandlerPreemptAndResume(t *testing.T, lang string, rig rigMaker) {
	r := rig(t, nil, nil)
	r.host.preemptAt = "write code and test"
	note, _ := RequirementsNote(MissionA(base).Feature, "sha256:"+strings.Repeat("0", 64))
	in := map[string]string{OutRequirements: r.host.put(note)}
	o := r.run(StageImplementation, "lease-1", 1, in)
	yieldedAt, after := "read requirements", "read requirements,write code and test"
	if lang == "python" {
		yieldedAt, after = "write code and test", "read requirements,publish patch"
	}
	if o.Kind != slots.Preempted || o.Checkpoint == nil || o.Checkpoint.Phase != yieldedAt {
		t.Fatalf("first run: %+v", o)
	}
	r.host.mu.Lock()
	r.host.phases = nil
	r.host.mu.Unlock()
	o = r.run(StageImplementation, "lease-2", 1, in)
	if !passed(o) {
		t.Fatalf("resumed run: %+v", o)
	}
	r.host.mu.Lock()
	defer r.host.mu.Unlock()
	// The setup step is redone (the workspace is gone), the checkpointed
	// work continues.
	if got := strings.Join(r.host.phases, ","); got != after {
		t.Fatalf("phases after resume: %s", got)
	}
}

func TestReviewDiffRules(t *testing.T) {
	base := TinyProject()
	withFeature := func(edit func(Tree)) string {
		changed, err := ImplementFeature(base, MissionA(time.Time{}).Feature, nil)
		if err != nil {
			t.Fatal(err)
		}
		edit(changed)
		return UnifiedDiff(base, changed)
	}
	cases := []struct {
		name  string
		patch string
		rep   *TestReport
		rules []string
	}{
		{"clean", withFeature(func(Tree) {}), &TestReport{Passed: true}, nil},
		{"todo", withFeature(func(t Tree) { t["calc/clamp.go"] += "\n// TODO: negative intervals\n" }), nil, []string{"no-todo"}},
		{"no test", withFeature(func(t Tree) { delete(t, "calc/clamp_test.go") }), nil, []string{"tests-touched"}},
		{"not gofmt", withFeature(func(t Tree) { t["calc/clamp.go"] = strings.Replace(t["calc/clamp.go"], "\treturn x", "  return x", 1) }), nil, []string{"gofmt"}},
		{"tests failed", withFeature(func(Tree) {}), &TestReport{Passed: false}, []string{"tests-pass"}},
		{"does not apply", "--- a/nope.go\n+++ b/nope.go\n@@ -1,1 +1,1 @@\n-x\n+y\n", nil, []string{"patch-applies"}},
		{"changelog only", UnifiedDiff(base, Tree{"CHANGELOG.md": base["CHANGELOG.md"] + "- more\n", "go.mod": base["go.mod"], "calc/calc.go": base["calc/calc.go"], "calc/calc_test.go": base["calc/calc_test.go"]}), nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ReviewDiff(base, c.patch, c.rep)
			var rules []string
			for _, f := range r.Findings {
				rules = append(rules, f.Rule)
			}
			if strings.Join(rules, ",") != strings.Join(c.rules, ",") || r.Blocking() != (len(c.rules) > 0) {
				t.Fatalf("findings %+v, want rules %v", r.Findings, c.rules)
			}
		})
	}
}

func TestFeatureValidateAndNote(t *testing.T) {
	f := MissionA(base).Feature
	note, err := RequirementsNote(f, "src")
	if err != nil {
		t.Fatal(err)
	}
	back, err := FeatureFromNote(note)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(f)
	b, _ := json.Marshal(back)
	if string(a) != string(b) {
		t.Fatalf("round trip:\n%s\n%s", a, b)
	}
	bad := []func(*Feature){
		func(f *Feature) { f.Func = "clamp" },
		func(f *Feature) { f.File = "../x" },
		func(f *Feature) { f.Package = "func" },
		func(f *Feature) { f.Cases = nil },
		func(f *Feature) { f.Body = nil },
		func(f *Feature) { f.Signature = "x int" },
		func(f *Feature) { f.Changelog = "a\nb" },
		func(f *Feature) { f.Body = []string{"return x +"} },
	}
	for i, edit := range bad {
		g := MissionA(base).Feature
		edit(&g)
		if _, _, err := RenderFeature(g); err == nil {
			t.Errorf("case %d: rendered %+v", i, g)
		}
	}
	if _, err := FeatureFromNote([]byte("# no spec")); err == nil {
		t.Error("note without a spec block accepted")
	}
	if _, err := DecodeFeature([]byte(`{"id":"x","extra":1}`)); err == nil {
		t.Error("unknown member accepted")
	}
}
