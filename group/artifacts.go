package group

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Artifacts (spec 13.1) live outside the log, content-addressed; the log
// carries each signed manifest published, one revision of the artifact
// per manifest. The authority checks the signature and the stored content
// (size, hash); the rules that read the Group are here.

// Artifacts are the revisions of the content hashes published in a Group.
type Artifacts map[string]uint64

// CheckManifestScope holds an artifact.publish to this Group and Mission,
// published by its producing agent; the authority checks it before it
// verifies the manifest's signature and reads the content.
func CheckManifestScope(g *Group, in Input) error {
	pl, err := payloadAs[protocol.PublishArtifactPayload](in)
	if err != nil {
		return err
	}
	m := pl.Manifest
	if m.GroupID != g.GroupID || (g.Mission != nil && m.MissionID != g.Mission.MissionID) {
		return protocol.InvalidCommand("manifest names group %s / mission %s, not this Group's", m.GroupID, m.MissionID).At("/payload/manifest/groupId")
	}
	if in.Actor.Kind != protocol.ActorAgent || m.Producer.AgentID != in.Actor.ID {
		return protocol.Forbidden("an artifact is published by its producing agent")
	}
	return nil
}

// DecidePublish decides an artifact.publish whose manifest is in scope,
// signed, and whose content is stored with the declared size: the WorkItem
// exists, the producer is its registered card (hash and agent version),
// every source is accounted for, and a worker (anyone but the coordinator
// publishing outside a lease) names its current lease. The same content may
// be published again (another lease, another item): a new revision.
func (as Artifacts) DecidePublish(g *Group, in Input, dir Directory, now time.Time) (EventDraft, error) {
	pl, err := payloadAs[protocol.PublishArtifactPayload](in)
	if err != nil {
		return EventDraft{}, err
	}
	m := pl.Manifest
	w := g.Items[m.WorkItemID]
	if w == nil {
		return EventDraft{}, protocol.InvalidCommand("work item %s not found", m.WorkItemID).At("/payload/manifest/workItemId")
	}
	if err := checkProducer(dir, m.Producer); err != nil {
		return EventDraft{}, err
	}
	if err := as.checkSources(w, m.SourceArtifacts); err != nil {
		return EventDraft{}, err
	}
	coordinator := g.Mission != nil && g.Mission.Coordinator != nil && g.Mission.Coordinator.AgentID == in.Actor.ID
	if pl.OwnershipEpoch != nil || pl.LeaseID != "" || !coordinator {
		if pl.OwnershipEpoch == nil || pl.LeaseID == "" {
			return EventDraft{}, protocol.InvalidCommand("a worker publishes under its lease: ownershipEpoch and leaseId are required").At("/payload/leaseId")
		}
		if err := w.CheckLease(in.Actor.ID, in.SessionEpoch, *pl.OwnershipEpoch, pl.LeaseID, now); err != nil {
			return EventDraft{}, err
		}
	}
	return EventDraft{Type: protocol.EvtArtifactPublished, Aggregate: protocol.Aggregate{Kind: protocol.AggregateArtifact, ID: m.ContentHash},
		Revision: as[m.ContentHash] + 1, Actor: in.Actor, Payload: &ArtifactPublished{Manifest: m}}, nil
}

// checkProducer holds a manifest's producer to the registered Agent Card
// (spec 13.1): the card hash and agent version it names are the card's.
func checkProducer(dir Directory, p protocol.ArtifactProducer) error {
	c, ok := dir.Card(p.AgentID)
	if !ok {
		return protocol.Forbidden("producer %s has no registered Agent Card", p.AgentID).At("/payload/manifest/producer/agentId")
	}
	if p.AgentCardHash != c.Hash {
		return protocol.InvalidCommand("producer agentCardHash %s is not the registered card's %s", p.AgentCardHash, c.Hash).At("/payload/manifest/producer/agentCardHash")
	}
	if p.AgentVersion != c.AgentVersion {
		return protocol.InvalidCommand("producer agentVersion %q is not the registered card's %q", p.AgentVersion, c.AgentVersion).At("/payload/manifest/producer/agentVersion")
	}
	return nil
}

// checkSources refuses provenance the Group cannot account for: every
// source artifact was published in this Group or is an input of the item's
// contract.
func (as Artifacts) checkSources(w *WorkItem, sources []string) error {
	for i, src := range sources {
		if as[src] > 0 || slices.ContainsFunc(w.Contract.Inputs, func(in protocol.InputRef) bool { return in.Artifact == src }) {
			continue
		}
		return protocol.InvalidCommand("source artifact %s is neither published in this Group nor an input of %s", src, w.WorkItemID).At(fmt.Sprintf("/payload/manifest/sourceArtifacts/%d", i))
	}
	return nil
}

// CheckContextSources holds a Context Package (spec 13.3) to this Group's
// log as it stands (last is its last sequence) and to artifacts published
// here, before the state machine decides its scope and version chain. The
// generator's signature is the caller's to check first.
func (as Artifacts) CheckContextSources(groupID string, last uint64, p protocol.ContextPackage) error {
	if p.SourceEvents.ToSequence > last {
		return protocol.InvalidCommand("context package %s cites events up to %d; the log of group %s ends at %d", p.PackageID, p.SourceEvents.ToSequence, groupID, last).At("/payload/package/sourceEvents/toSequence")
	}
	for i, a := range p.Artifacts {
		if _, ok := as[a]; !ok {
			return protocol.InvalidCommand("context package %s names artifact %s, never published in group %s", p.PackageID, a, groupID).At("/payload/package/artifacts/" + strconv.Itoa(i))
		}
	}
	return nil
}

// Fold applies one artifact event; it reports whether it was one.
func (as Artifacts) Fold(d EventDraft) bool {
	if d.Type != protocol.EvtArtifactPublished {
		return false
	}
	as[d.Aggregate.ID] = d.Revision
	return true
}
