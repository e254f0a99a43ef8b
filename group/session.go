package group

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// RevokeSession applies a replacement session of agentID (spec 11.3): every
// execution lease the agent holds under an older session is revoked and
// its WorkItem returns to queued, ownership kept, so the new session can
// start it again with a new lease. Each affected WorkItem gets a
// work.progressed event stating the revocation. It is refused by no rule;
// an error is a defect (INTERNAL_ERROR).
func (g *Group) RevokeSession(agentID string, newEpoch uint64, now time.Time) (Outcome, error) {
	t := g.begin(Input{GroupID: g.GroupID, Actor: AuthorityActor}, now)
	for _, id := range t.itemIDs() {
		w := t.peek(id)
		if w.Lease == nil || w.Lease.AgentID != agentID || w.Lease.SessionEpoch >= newEpoch || w.State != protocol.WorkActive {
			continue
		}
		w = t.item(id)
		old := w.Lease.LeaseID
		w.Lease = nil
		w.State = protocol.WorkQueued
		t.emitWork(protocol.EvtWorkProgressed, w, &Progressed{LeaseID: old, Reason: ReasonSessionReplaced})
	}
	return t.apply()
}
