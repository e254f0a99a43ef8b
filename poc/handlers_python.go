package poc

import (
	"embed"
	"os"
	"path/filepath"
	"strconv"

	"github.com/missionweave/mwp-worker/handlers/python"
	"github.com/missionweave/mwp-worker/slots"
)

// The PoC's stages written in Python (poc/python/): requirements analysis,
// code review and the load stages run as external handlers over mwp-slot/1
// through the shipped helper module (handlers/python/mwpslot.py). They read
// their inputs with the protocol's fetch request; the worker checks that
// each is an input of the item's contract.
//
//go:embed python/*.py
var pythonStages embed.FS

// PythonStages is an installed copy of the Python stages.
type PythonStages struct {
	Exe   string // the python3 executable
	Dir   string // mwpslot.py and the stage scripts
	Gofmt string // gofmt for the reviewer's check of new Go files; "" skips it
}

// InstallPythonStages writes the helper module and the stage scripts into
// dir and finds python3 (an error when there is none) and gofmt beside the
// go command.
func InstallPythonStages(dir string) (*PythonStages, error) {
	exe, err := python.Find()
	if err != nil {
		return nil, err
	}
	// The stages run in their slot's directory: a relative --data path
	// would name the scripts from there.
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := python.Install(dir); err != nil {
		return nil, err
	}
	files, err := pythonStages.ReadDir("python")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := pythonStages.ReadFile("python/" + f.Name())
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), data, 0o644); err != nil {
			return nil, err
		}
	}
	p := &PythonStages{Exe: exe, Dir: dir}
	if goBin, err := FindGo(); err == nil {
		if g := filepath.Join(filepath.Dir(goBin), "gofmt"); fileExists(g) {
			p.Gofmt = g
		}
	}
	return p, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// handlers are the Python stages as slots.Exec handlers of agentID (the
// producer their Evidence names). The Go constants of a stage are passed
// as arguments, so each has one description.
func (p *PythonStages) handlers(agentID string) []slots.Handler {
	run := func(capID, script string, args ...string) slots.Handler {
		// -S -E: no site module (a site's .pth imports cost more than the
		// stage itself) and no PYTHON* variables; the stages need neither.
		return slots.Exec{Path: p.Exe, Cap: capability(capID),
			Args: append([]string{"-S", "-E", filepath.Join(p.Dir, script), "--agent", agentID}, args...)}
	}
	review := []string{}
	if p.Gofmt != "" {
		review = []string{"--gofmt", p.Gofmt}
	}
	return []slots.Handler{
		run(CapRequirements, "requirements.py"),
		run(CapReview, "review.py", review...),
		run(CapLoad, "load.py", "--steps", strconv.Itoa(LoadSteps), "--rounds", strconv.Itoa(LoadRounds),
			"--step-ms", strconv.Itoa(int(LoadStepTime.Milliseconds()))),
		run(CapSoak, "load.py", "--steps", strconv.Itoa(SoakSteps), "--rounds", strconv.Itoa(LoadRounds),
			"--step-ms", strconv.Itoa(int(SoakStepTime.Milliseconds()))),
	}
}

// pythonKinds are the stage kinds whose handlers are Python when python3
// is there (PythonStages.handlers); the others run in Go.
var pythonKinds = map[StageKind]bool{StageRequirements: true, StageReview: true, StageLoad: true, StageSoak: true}

// HandlerLanguage is the language of the handler that runs a stage of
// kind k: "python" or "go" (every stage is Go without python3).
func HandlerLanguage(k StageKind, python bool) string {
	if python && pythonKinds[k] {
		return "python"
	}
	return "go"
}
