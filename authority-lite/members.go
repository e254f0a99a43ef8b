package authoritylite

import (
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Memberships, messages, grants and artifact revisions are decided by
// package group (members.go, messages.go, grants.go, artifacts.go there);
// the service keeps them per Group, folds what a decision drafted and
// writes them beside the events.

// MaxDelegationDepth is the default bound of re-delegation chains
// (spec 20), Policy.MaxDelegationDepth; a maxDelegationDepth grant lifts it
// for one command.
const MaxDelegationDepth = group.MaxDelegationDepth

// directory is the Organization as package group's decisions read it.
type directory struct{ o *org }

func (d directory) Card(agentID string) (group.Card, bool) {
	a := d.o.agent(agentID)
	if a == nil {
		return group.Card{}, false
	}
	return group.Card{Roles: a.Card.Roles, Hash: a.CardHash, AgentVersion: a.Card.AgentVersion}, true
}

func (d directory) PolicyService(id string) bool { return d.o.isPolicyService(id) }

// record adds drafted events to p and folds those of memberships,
// messages, grants and artifacts into the Group's state; the Mission and
// WorkItem events were folded by the Group already.
func (p *pending) record(gs *groupState, ds ...group.EventDraft) {
	for _, d := range ds {
		switch d.Aggregate.Kind {
		case protocol.AggregateMembership:
			gs.members.Fold(d)
		case protocol.AggregateMessage:
			if gs.msgs != nil { // else rebuilt from the log when first read
				gs.msgs.FoldAll([]group.EventDraft{d})
			}
		case protocol.AggregatePolicy:
			p.grants = gs.grants.Fold(d) || p.grants
		case protocol.AggregateArtifact:
			p.artifacts = gs.artifacts.Fold(d) || p.artifacts
		}
		p.drafts = append(p.drafts, d)
	}
}

// ensureMember gives principal the role, joining the Group when new.
func ensureMember(gs *groupState, principal protocol.Actor, role protocol.Role, by protocol.Actor, p *pending) {
	p.record(gs, gs.members.Ensure(gs.id, principal, role, by, p.now.Time)...)
}

// decided records the one event a side decision drafted.
func decided(gs *groupState, p *pending, d group.EventDraft, err error) error {
	if err != nil {
		return err
	}
	p.record(gs, d)
	return nil
}

// precheck holds a command to what the Organization knows before the state
// machines decide it: the cards of a coordinator and of offer candidates,
// a Context Package's generator signature and its sources in this Group.
func precheck(o *org, gs *groupState, in group.Input) error {
	if pl, ok := in.Payload.(*protocol.PublishContextPayload); ok {
		if err := protocol.VerifyContextPackage(pl.Package, o); err != nil {
			return protocol.Under(err, "/payload/package")
		}
		return gs.artifacts.CheckContextSources(gs.id, gs.last, pl.Package)
	}
	return gs.members.CheckCardRoles(gs.id, in, directory{o})
}
