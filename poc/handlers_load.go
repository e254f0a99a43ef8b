package poc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// Load stages exist to make the scheduler's weighted sharing visible
// (spec 22): each Mission has several of them in parallel after its tests,
// so both Groups keep a backlog on the shared worker at the same time. A
// load stage does a fixed, checkable amount of work in LoadSteps steps of at
// least LoadStepTime each — rounds of SHA-256 chained from the patch under
// review — with structured progress and a checkpoint after every step, so
// it can be preempted and resumed anywhere. The reviewer recomputes the
// chain.
const (
	LoadSteps     = 2
	LoadRounds    = 20000
	LoadStepTime  = 30 * time.Millisecond
	loadStepLabel = "load step "
)

// Soak stages: the same chain in SoakSteps steps of at least SoakStepTime,
// so a soak run is busy between safe points a second apart.
const (
	SoakStages   = 2
	SoakSteps    = 2
	SoakStepTime = time.Second
)

// LoadReport is a load stage's output: the chain's head after Steps steps
// of Rounds rounds each, starting from the WorkItem id and the digest of the
// input patch (so each load stage's output is its own artifact).
type LoadReport struct {
	WorkItemID string `json:"workItemId"`
	Patch      string `json:"patch"`
	Steps      int    `json:"steps"`
	Rounds     int    `json:"rounds"`
	Chain      string `json:"chain"`
}

// LoadHandler runs load stages, or soak stages when soak is set.
type LoadHandler struct {
	cfg  *HandlerConfig
	soak bool
}

func (h *LoadHandler) Capability() protocol.Capability {
	if h.soak {
		return capability(CapSoak)
	}
	return capability(CapLoad)
}

// stepsOf is the number and least length of the steps of a load (false)
// or soak (true) stage.
func stepsOf(soak bool) (int, time.Duration) {
	if soak {
		return SoakSteps, SoakStepTime
	}
	return LoadSteps, LoadStepTime
}

func loadSeed(workItemID, patch string) string { return workItemID + " " + patch }

// chainStep is one step of the load chain from head.
func chainStep(head string, rounds int) string {
	sum := sha256.Sum256([]byte(head))
	for range rounds - 1 {
		sum = sha256.Sum256(sum[:])
	}
	return "sha256:" + hex.EncodeToString(sum[:])
}

// LoadChain is the chain's head after steps steps from the WorkItem id and
// the patch digest.
func LoadChain(workItemID, patch string, steps, rounds int) string {
	head := loadSeed(workItemID, patch)
	for range steps {
		head = chainStep(head, rounds)
	}
	return head
}

// Run implements slots.Handler.
func (h *LoadHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	nSteps, stepTime := stepsOf(h.soak)
	steps := []step{{name: "read patch", setup: true, fn: func(_ context.Context, j *job) error {
		_, d, err := j.input(OutPatch)
		if err != nil {
			return err
		}
		if j.st.Vals["chain"] == "" {
			j.st.Vals["chain"] = loadSeed(j.w.Slot().WorkItemID, d)
		}
		j.scr["patch"] = d
		return nil
	}}}
	for i := range nSteps {
		steps = append(steps, step{name: loadStepLabel + strconv.Itoa(i+1), fn: func(ctx context.Context, j *job) error {
			t := time.NewTimer(stepTime)
			defer t.Stop()
			j.st.Vals["chain"] = chainStep(j.st.Vals["chain"], LoadRounds)
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
	}
	steps = append(steps, step{name: "write load report", fn: func(ctx context.Context, j *job) error {
		rep := LoadReport{WorkItemID: j.w.Slot().WorkItemID, Patch: j.scr["patch"].(string), Steps: nSteps, Rounds: LoadRounds, Chain: j.st.Vals["chain"]}
		raw, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		d, err := j.publish(ctx, OutLoadReport, MediaJSON, raw)
		if err != nil {
			return err
		}
		j.record(EvLoadChain, true, "SHA-256 chain from the patch", fmt.Sprintf("%d steps of %d rounds", nSteps, LoadRounds), d)
		return nil
	}})
	return h.cfg.runSteps(ctx, w, steps)
}

// checkLoad is the reviewer's deterministic check of a load report.
// A soak report is checked against SoakSteps.
func checkLoad(raw []byte, workItemID, patch string, soak bool) []string {
	nSteps, _ := stepsOf(soak)
	var r LoadReport
	if err := json.Unmarshal(raw, &r); err != nil {
		return []string{"load report: " + err.Error()}
	}
	if r.WorkItemID != workItemID {
		return []string{"the load report is for " + r.WorkItemID + ", not " + workItemID}
	}
	if r.Patch != patch {
		return []string{"the load report is for " + r.Patch + ", not the input patch " + patch}
	}
	if r.Steps != nSteps || r.Rounds != LoadRounds {
		return []string{fmt.Sprintf("the load report did %d×%d rounds, the stage asks %d×%d", r.Steps, r.Rounds, nSteps, LoadRounds)}
	}
	if want := LoadChain(workItemID, patch, r.Steps, r.Rounds); r.Chain != want {
		return []string{"the load chain does not recompute: " + r.Chain + " is not " + want}
	}
	return nil
}
