package poc

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Properties of decide over arbitrary views of Mission A: it offers only
// items whose dependencies are verified, only to member workers with the
// capability, never to an owner that lapsed while another candidate
// exists, with a contract the authority accepts; it submits for approval
// only when every item is verified; and it does nothing unless the Mission
// is active and this agent holds the coordinator lease.
func TestDecideProperties(t *testing.T) {
	m := MissionA(base)
	states := []protocol.WorkItemState{protocol.WorkOpen, protocol.WorkOffered, protocol.WorkQueued, protocol.WorkActive,
		protocol.WorkSubmitted, protocol.WorkVerified, protocol.WorkFailed, protocol.WorkBlocked}
	workers := []WorkerInfo{
		{AgentID: "w1", Capabilities: WorkerCapabilities()},
		{AgentID: "w2", Capabilities: []protocol.Capability{capability(CapImplement), capability(CapTest)}},
		{AgentID: "w3", Capabilities: []protocol.Capability{{ID: CapReview, Version: "2.0.0"}}},
	}
	rapid.Check(t, func(t *rapid.T) {
		now := base.Add(time.Duration(rapid.IntRange(0, 3600).Draw(t, "now")) * time.Second)
		v := newView(m.GroupID)
		v.missionState = rapid.SampledFrom([]protocol.MissionState{protocol.MissionActive, protocol.MissionActive, protocol.MissionAwaitingApproval}).Draw(t, "mission")
		v.coordAgent = rapid.SampledFrom([]string{"coord", "coord", "other"}).Draw(t, "coordinator")
		v.coordExpires = now.Add(time.Duration(rapid.IntRange(1, 20).Draw(t, "lease")) * time.Minute)
		for _, w := range workers {
			v.members[w.AgentID] = rapid.Bool().Draw(t, "member "+w.AgentID)
		}
		authorized := rapid.IntRange(0, len(m.WorkStages())).Draw(t, "authorized")
		for i, s := range m.WorkStages()[:authorized] {
			w := &itemView{id: s.WorkItemID, contract: s.Contract, state: rapid.SampledFrom(states).Draw(t, "state"), revision: 1}
			if w.state == protocol.WorkQueued || w.state == protocol.WorkActive {
				w.owner, w.epoch = rapid.SampledFrom([]string{"w1", "w2"}).Draw(t, "owner"), 1
				w.startDeadline = now.Add(time.Duration(rapid.IntRange(-60, 60).Draw(t, "deadline")) * time.Second)
				w.leaseID, w.leaseExpires = "lease", w.startDeadline
			}
			if w.state == protocol.WorkOffered {
				w.offerExpires = now.Add(time.Duration(rapid.IntRange(-60, 60).Draw(t, "offer")) * time.Second)
			}
			if w.state == protocol.WorkFailed {
				w.failures = rapid.IntRange(1, 4).Draw(t, "failures")
			}
			if w.state == protocol.WorkSubmitted || w.state == protocol.WorkVerified {
				d := protocol.Digest([]byte(s.WorkItemID))
				v.manifests[d] = protocol.ArtifactManifest{ContentHash: d, MediaType: s.Contract.RequiredOutputs[0].MediaType}
				w.submission = &submission{seq: uint64(i + 1), agent: "w1", artifacts: []string{d}, reviewed: w.state == protocol.WorkVerified}
				if w.state == protocol.WorkVerified {
					w.accepted = &acceptance{artifacts: []string{d}}
				}
			}
			v.items[s.WorkItemID] = w
		}
		acts := decide(v, m, workers, now, decideConfig{me: "coord", renewBefore: 5 * time.Minute, inputs: map[string][]byte{}})
		if v.missionState != protocol.MissionActive || v.coordAgent != "coord" {
			if len(acts) > 0 {
				t.Fatalf("acted without the lease on an active Mission: %+v", acts)
			}
			return
		}
		for _, a := range acts {
			switch a.kind {
			case actOffer:
				w := v.items[a.item]
				if !depsVerified(v, w.contract) || !needsOffer(w, now) {
					t.Fatalf("offered %s (%s) with unverified dependencies or no need", a.item, w.state)
				}
				p := offerPayload(v, w, a.stage, workers, now, time.Minute, 2)
				if len(p.Candidates) == 0 || len(p.Candidates) > 2 {
					t.Fatalf("%d candidates", len(p.Candidates))
				}
				for _, c := range p.Candidates {
					wk := workers[slices.IndexFunc(workers, func(x WorkerInfo) bool { return x.AgentID == c.AgentID })]
					if !v.members[c.AgentID] || capabilityMatch(wk, w.contract) == nil || !c.SelectionBasis.AuthorizationEligible {
						t.Fatalf("offered %s to %s, not a capable member", a.item, c.AgentID)
					}
					if w.ownerLapsed(now) && c.AgentID == w.owner && len(candidates(v, w, workers, now)) > 0 && slices.ContainsFunc(workers, func(x WorkerInfo) bool {
						return x.AgentID != w.owner && v.members[x.AgentID] && capabilityMatch(x, w.contract) != nil
					}) {
						t.Fatalf("offered %s back to its lapsed owner %s", a.item, c.AgentID)
					}
				}
				if err := group.CheckContract(&p.Contract); err != nil {
					t.Fatalf("offered contract: %v", err)
				}
				if r := p.Contract.Revision; r != w.contract.Revision && r != w.contract.Revision+1 {
					t.Fatalf("revision %d from %d", r, w.contract.Revision)
				}
			case actApproval:
				if authorized != len(m.WorkStages()) || verifiedCount(v, m.WorkStages()) != authorized {
					t.Fatalf("submitted for approval with unverified items")
				}
			case actReview:
				if v.items[a.item].state != protocol.WorkSubmitted {
					t.Fatalf("reviewing %s in %s", a.item, v.items[a.item].state)
				}
			case actAuthorize:
				if v.items[a.item] != nil {
					t.Fatalf("authorizing %s twice", a.item)
				}
			}
		}
	})
}
