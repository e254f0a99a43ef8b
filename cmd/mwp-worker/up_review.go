package main

import (
	"context"
	"fmt"
	"io"

	"github.com/missionweave/mwp-worker/poc"
)

// showReview is what `up` shows a terminal before asking for the
// decision: the Mission's stages as `mission status` shows a Mission
// awaiting approval (the handler's evidence, outputs by name with a
// preview, the review in one line), not the approval projection's review
// records and digests.
func showReview(ctx context.Context, groupID string, src poc.ServiceSource) func(io.Writer, poc.PendingMission) error {
	return func(w io.Writer, p poc.PendingMission) error {
		v := newMissionView(groupID)
		evs, err := src.Service.Events(v.g.GroupID, 0, 0)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := v.add(e.Raw); err != nil {
				return err
			}
		}
		s := v.status()
		s.render(w)
		v.renderReview(ctx, w, s, src.ArtifactBytes)
		_, err = fmt.Fprintf(w, "\nsummary: %s\n", safe(oneLine(p.Summary)))
		return err
	}
}
