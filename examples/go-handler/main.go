// Command go-handler is a worker whose handler is Go code: it has every
// flag, environment variable, signal and log line of `mwp-worker run`
// (go run ./examples/go-handler --help). The handler answers text.echo
// 1.0.0 with the contract's goal as a text artifact.
package main

import (
	"context"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
	"github.com/missionweave/mwp-worker/workercmd"
)

type echo struct{}

func (echo) Capability() protocol.Capability {
	return protocol.Capability{ID: "text.echo", Version: "1.0.0"}
}

func (echo) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	d, err := w.PublishArtifact(ctx, "text/plain", []byte(w.Contract().Goal+"\n"))
	if err != nil {
		return slots.Result{}, err
	}
	res := slots.Result{Artifacts: []string{d}}
	for _, c := range w.Contract().AcceptanceCriteria {
		res.Evidence = append(res.Evidence, protocol.Evidence{Subject: w.Slot().WorkItemID, Criteria: protocol.List[string]{c.ID},
			Method: "echo", Result: protocol.EvidencePass, Producer: w.Agent(),
			Timestamp: protocol.NewTime(time.Now()), Artifacts: protocol.List[string]{d}})
	}
	return res, nil
}

func main() { workercmd.Main(echo{}) }
