package poc

import (
	"context"
	"encoding/json"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// ServiceSource is the ApprovalSource of an in-process authority: Missions
// in awaiting_approval with the evidence and artifact manifests their
// coordinator submitted, read from the Group's log.
type ServiceSource struct {
	Service *authoritylite.Service
	Human   protocol.Actor
}

// Pending lists the Missions awaiting approval.
func (s ServiceSource) Pending(ctx context.Context) ([]PendingMission, error) {
	var out []PendingMission
	for _, g := range s.Service.GroupIDs() {
		m, ok := s.Service.Mission(g)
		if !ok || m.State != protocol.MissionAwaitingApproval {
			continue
		}
		p := PendingMission{MissionID: m.MissionID, GroupID: g, Title: m.Title, Revision: m.Revision, Budgets: m.Budgets}
		for _, id := range s.Service.WorkItemIDs(g) {
			p.Used = p.Used.Add(s.Service.Usage(g, id))
		}
		if mb, ok := s.Service.Membership(g, s.Human); ok {
			p.MembershipEpoch = mb.MembershipEpoch
		}
		evs, err := s.Service.Events(g, 0, 0)
		if err != nil {
			return nil, err
		}
		manifests := map[string]protocol.ArtifactManifest{}
		for _, se := range evs {
			var ev protocol.Event
			if err := json.Unmarshal(se.Raw, &ev); err != nil {
				return nil, err
			}
			switch ev.Type {
			case protocol.EvtArtifactPublished:
				if a, err := group.DecodeAs[group.ArtifactPublished](&ev); err == nil {
					manifests[a.Manifest.ContentHash] = a.Manifest
				}
			case protocol.EvtMissionSubmittedForApproval:
				if me, err := group.DecodeAs[group.SubmittedForApproval](&ev); err == nil {
					p.Summary, p.Evidence, p.SubmittedAt = me.Summary, me.Evidence, ev.OccurredAt.Time
					p.Artifacts = p.Artifacts[:0]
					for _, d := range me.Artifacts {
						if man, ok := manifests[d]; ok {
							p.Artifacts = append(p.Artifacts, man)
						}
					}
				}
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// GroupEvents returns the raw events of groupID's log, the review's input.
func (s ServiceSource) GroupEvents(_ context.Context, groupID string) ([]json.RawMessage, error) {
	evs, err := s.Service.Events(groupID, 0, 0)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(evs))
	for i, e := range evs {
		out[i] = e.Raw
	}
	return out, nil
}

// ArtifactBytes returns stored artifact bytes (hash-checked by the store).
func (s ServiceSource) ArtifactBytes(_ context.Context, digest string) ([]byte, error) {
	return s.Service.Artifact(digest)
}

// SubmitTo returns a SubmitFunc sending to an in-process authority.
func SubmitTo(svc *authoritylite.Service) SubmitFunc {
	return func(ctx context.Context, signed []byte) (protocol.Receipt, error) {
		r, err := svc.Submit(ctx, "", signed)
		if err != nil {
			return protocol.Receipt{}, err
		}
		return *r, nil
	}
}
