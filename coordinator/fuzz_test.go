package coordinator

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The coordinator folds events from the authority, outside input: any
// bytes either fold, or are refused with an error, never a panic, and
// decide over the result does not panic either.
func FuzzViewApply(f *testing.F) {
	p := parsePlan(f, reviewedPlan)
	f.Add([]byte(`{"eventId":"e1","groupId":"grp-r","sequence":1,"type":"work.authorized","aggregate":{"kind":"work_item","id":"mis-r:draft"},"payload":{}}`))
	f.Add([]byte(`{"eventId":"e1","groupId":"grp-r","sequence":1,"type":"mission.created","payload":{"mission":{"missionId":"mis-r","state":"active"}}}`))
	f.Add([]byte(`{"eventId":"e2","groupId":"grp-r","sequence":1,"type":"work.submitted","aggregate":{"kind":"work_item","id":"x"},"payload":{"workItemId":"x"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		v := stateView(t, p, protocol.WorkOpen, protocol.WorkOpen)
		var ev protocol.Event
		if json.Unmarshal(raw, &ev) != nil {
			return
		}
		ev.GroupID, ev.Sequence = p.Mission.GroupID, protocol.Uint64(1)
		_ = v.apply(&ev)
		_ = decide(v, p, []Worker{{AgentID: "w1", Capabilities: capsOf(p)}}, t0.Add(time.Minute), policy{me: "c1", leaseDuration: time.Minute, maxCandidates: 2, prechecked: map[string]uint64{}})
	})
}
