package main

import (
	"context"
	"io"

	"github.com/missionweave/mwp-worker/poc"
	"github.com/missionweave/mwp-worker/review"
)

// showReview is what `up` shows a terminal before asking for the
// decision: the Mission's stages as `mission status` shows a Mission
// awaiting approval (the handler's evidence, outputs by name with a
// preview, the review in one line), not the approval projection's review
// records and digests.
func showReview(ctx context.Context, groupID string, src poc.ServiceSource) func(io.Writer, poc.PendingMission) error {
	return func(w io.Writer, p poc.PendingMission) error {
		v := review.NewView(groupID)
		evs, err := src.Service.Events(groupID, 0, 0)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := v.Add(e.Raw); err != nil {
				return err
			}
		}
		return v.Show(ctx, w, p.Summary, src.ArtifactBytes)
	}
}
