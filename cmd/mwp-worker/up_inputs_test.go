package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/protocol"
)

const outsidePlan = "testdata/outside/plan.yaml"

// An outside plan with two input files and four stages (a reviewer among
// them) runs to approval with `up --input … --auto-approve`: once with a
// Python handler (importing mwpslot with no copy beside it), once with the
// same handler written in Go on workercmd.Main's up. The stages read the
// files by input name and their dependencies' outputs by output name.
func TestUpOutsidePlanWithInputs(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the Python handler and the plan's check cannot run")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where the worker keeps mwpslot.py for PYTHONPATH
	bin, goHandler := buildBinary(t), buildPackage(t, "./testdata/outside/gohandler")
	spec := filepath.Join(t.TempDir(), "spec.md")
	if err := os.WriteFile(spec, []byte("Count the cities\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	handler, err := filepath.Abs("testdata/outside/handler.py")
	if err != nil {
		t.Fatal(err)
	}
	// The Python run reads `data` from the file the plan names; the Go
	// run's --input data=FILE, another file, overrides it.
	otherData := filepath.Join(t.TempDir(), "cities.csv")
	if err := os.WriteFile(otherData, []byte("city,people\nBrest,1\nNice,4\nPau,6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		bin      string
		args     []string
		dataFile string
	}{
		{"python", bin, []string{"--input", "spec=" + spec, "--handler-exec", "outside.run=" + handler}, "testdata/outside/inputs/data.csv"},
		{"go", goHandler, []string{"--input", "spec=" + spec, "--input", "data=" + otherData, "--log-format", "json"}, otherData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			p := startProc(t, tc.bin, append([]string{"up", outsidePlan, "--auto-approve", "--data", data}, tc.args...)...)
			select {
			case err := <-p.done:
				p.done <- err // for the cleanup
				if err != nil {
					t.Fatalf("up: %v\n%s", err, p.logs())
				}
			case <-time.After(time.Minute):
				t.Fatalf("up did not end:\n%s", p.logs())
			}
			for _, want := range []string{"stage review verified\n", "mission mis-outside approved\n"} {
				if !strings.Contains(p.stdout(), want) {
					t.Fatalf("no %q:\n%s", want, p.logs())
				}
			}
			svc, err := authoritylite.Open(authoritylite.Config{Dir: filepath.Join(data, "authority")})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			// The gather stage read both files, bound by name to their digests.
			w, ok := svc.WorkItem("grp-outside", "mis-outside:gather")
			if !ok {
				t.Fatal("no gather WorkItem")
			}
			got := map[string]string{}
			for _, in := range w.Contract.Inputs {
				got[in.Name] = in.Artifact
			}
			if got["spec"] != protocol.Digest(mustRead(t, spec)) || got["data"] != protocol.Digest(mustRead(t, tc.dataFile)) {
				t.Errorf("gather's inputs %v, want spec and data by their files' digests", got)
			}
			if tc.name == "go" {
				// The Go handler's own line is in the worker's format with the run's ids.
				var line map[string]any
				for l := range strings.Lines(p.stderrText()) {
					if strings.Contains(l, `"stage starts"`) {
						if err := json.Unmarshal([]byte(l), &line); err != nil {
							t.Fatalf("handler line %q: %v", l, err)
						}
						break
					}
				}
				if line["item"] == nil || line["lease"] == nil || line["group"] != "grp-outside" {
					t.Errorf("the handler's log line lacks the run's ids: %v\n%s", line, p.stderrText())
				}
			}
		})
	}
	// Python wrote no bytecode beside the handler.
	if _, err := os.Stat("testdata/outside/__pycache__"); err == nil {
		t.Error("testdata/outside/__pycache__ was left behind")
	}
}

// A plan naming an input nobody provides is refused before anything
// starts: one line, exit 1, no data directory; plan validate says which.
func TestUpRefusesAMissingInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `up: plan testdata/outside/plan.yaml names input "spec" (line 20, stage gather) and nobody provides it: give --input NAME=FILE` + "\n"},
		{[]string{"--input", "spec=testdata/outside/plan.yaml", "--input", "colour=x"}, `up: --input colour: plan testdata/outside/plan.yaml has no input named "colour" (it names spec, data)` + "\n"},
		{[]string{"--input", "spec=" + filepath.Join(t.TempDir(), "none.md")}, "no such file or directory"},
		{[]string{"--input", "spec"}, `up: --input "spec": want NAME=FILE` + "\n"},
	} {
		code, out, errOut := runCLI(t, append([]string{"up", outsidePlan, "--auto-approve"}, tc.args...)...)
		if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", tc.args, code, out, errOut, tc.want)
		}
	}
	code, out, _ := runCLI(t, "plan", "validate", outsidePlan)
	if code != 0 || out != outsidePlan+": ok, 4 stages; give --input spec=FILE\n" {
		t.Errorf("plan validate: %d %q", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, mustRead(t, outsidePlan), 0o644); err != nil { // its data file is not beside it
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "plan", "validate", bad)
	if code != 1 || !strings.HasPrefix(out, bad+`:21:28: input "data": file `+filepath.Join(filepath.Dir(bad), "inputs/data.csv")+": no such file or directory") {
		t.Errorf("plan validate of a plan without its file: %d %q", code, out)
	}
}

// buildPackage builds the main package at pkg (relative to this one) into
// a temporary directory.
func buildPackage(t *testing.T, pkg string) string {
	t.Helper()
	goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command(goBin, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func (p *proc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errb.String()
}
