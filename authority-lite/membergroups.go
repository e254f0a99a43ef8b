package authoritylite

import (
	"sync"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// memberNotice wakes those waiting for a membership change in any Group
// (wss.MemberGroups: the GROUPS notice to connected agents).
type memberNotice struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next membership change.
func (n *memberNotice) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *memberNotice) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// MembershipChanged returns a channel closed once a membership event of
// any Group is durable.
func (s *Service) MembershipChanged() <-chan struct{} { return s.memberNotice.wait() }

// MemberGroups lists, sorted, the Groups the agent is an active member of
// (what Authorize lets it SUBSCRIBE), less the archived ones: they take
// no more commands, and a worker that forgot one drops its tombstone once
// it is no longer listed. A member may still SUBSCRIBE an archived Group.
func (s *Service) MemberGroups(agentID string) []string {
	key := group.MemberKey(protocol.Actor{Kind: protocol.ActorAgent, ID: agentID})
	out := []string{}
	for _, id := range s.GroupIDs() { // sorted
		gs := s.peekGroup(id)
		if gs == nil {
			continue // purged since listed
		}
		gs.mu.Lock()
		m, archived := gs.members[key], gs.archived
		gs.mu.Unlock()
		if m != nil && m.State == protocol.MembershipActive && !archived {
			out = append(out, id)
		}
	}
	return out
}

// changesMembership reports whether events hold a membership change.
func changesMembership(events []sealed) bool {
	for _, e := range events {
		if e.ev.Type == protocol.EvtMembershipChanged || e.ev.Type == protocol.EvtMembershipEnded {
			return true
		}
	}
	return false
}
