// Command gohandler is the outside plan's handler (capability outside.run)
// written in Go on workercmd.Main: the same stages as handler.py.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
	"github.com/missionweave/mwp-worker/workercmd"
)

type outside struct{}

func (outside) Capability() protocol.Capability {
	return protocol.Capability{ID: "outside.run", Version: "1.0.0"}
}

func (outside) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	s := w.Slot()
	stage := s.WorkItemID[strings.LastIndexByte(s.WorkItemID, ':')+1:]
	w.Logger().Info("stage starts", "stage", stage)
	var ierr error // the first input that could not be read
	input := func(name string) string {
		_, data, err := w.Input(ctx, name)
		if ierr == nil {
			ierr = err
		}
		return string(data)
	}
	var out []byte
	media := "text/markdown"
	switch stage {
	case "gather":
		rows := len(strings.Split(strings.TrimSpace(input("data")), "\n")) - 1
		out = fmt.Appendf(nil, "# notes\n\nspec: %s\n\ndata rows: %d\n", strings.TrimSpace(input("spec")), rows)
	case "summarize":
		out = []byte("# summary\n\n" + input("notes"))
	case "count":
		rows := len(strings.Split(strings.TrimSpace(input("data")), "\n")) - 1
		out, media = fmt.Appendf(nil, `{"rows": %d}`, rows), "application/json"
	default: // review: a verdict per reviewed stage
		var counts struct{ Rows int }
		raw, summary := input("counts"), input("summary")
		if ierr != nil {
			return slots.Result{}, ierr
		}
		if err := json.Unmarshal([]byte(raw), &counts); err != nil {
			return slots.Result{}, err
		}
		verdict := map[string]bool{"summarize": strings.Contains(summary, "# summary"), "count": counts.Rows == 3}
		out, _ = json.Marshal(verdict)
		d, err := w.PublishArtifact(ctx, "application/json", out)
		if err != nil {
			return slots.Result{}, err
		}
		ev := w.Evidence(map[string]slots.EvidenceCheck{"read": {Result: protocol.EvidencePass, Method: "read the reviewed outputs", Artifacts: []string{d}}})
		for st, ok := range verdict {
			e := ev[0]
			e.Subject, e.Result = s.MissionID+":"+st, protocol.EvidencePass
			if !ok {
				e.Result = protocol.EvidenceFail
			}
			ev = append(ev, e)
		}
		return slots.Result{Artifacts: []string{d}, Evidence: ev}, nil
	}
	if ierr != nil {
		return slots.Result{}, ierr
	}
	d, err := w.PublishArtifact(ctx, media, out)
	if err != nil {
		return slots.Result{}, err
	}
	return slots.Result{Artifacts: []string{d}, Evidence: w.Evidence(map[string]slots.EvidenceCheck{
		"read": {Result: protocol.EvidencePass, Method: "read its inputs", Artifacts: []string{d}}})}, nil
}

func main() { workercmd.Main(outside{}) }
