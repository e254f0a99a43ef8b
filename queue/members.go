package queue

import (
	"maps"
	"slices"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Member is one principal's membership of a Group as the view last saw it:
// the membershipEpoch its commands must carry (spec 15.1) and its state.
// The view keeps every principal's, from membership events and from a
// restored snapshot's memberships, so a worker that restored a snapshot or
// restarted knows its epoch without the events that set it.
type Member struct {
	Principal  protocol.Actor           `json:"principal"`
	Epoch      uint64                   `json:"membershipEpoch"`
	State      protocol.MembershipState `json:"state"`
	UpdatedSeq uint64                   `json:"updatedSeq"`
}

// Active reports whether the membership lets its principal act.
func (m Member) Active() bool { return m.State == protocol.MembershipActive }

// MemberRef names one principal of a Group whose membership changed.
type MemberRef struct {
	GroupID   string         `json:"groupId"`
	Principal protocol.Actor `json:"principal"`
}

func memberKey(a protocol.Actor) string { return string(a.Kind) + ":" + a.ID }

// membership projects a membership.changed, membership.ended or
// membership.delegation_granted event: each carries the principal's whole
// membership record (the delegate's for a delegation).
func (s *stepper) membership(f *fact, p *protocol.Membership) *protocol.Error {
	if p.Principal.ID == "" {
		return missing(f, "principal")
	}
	st := group.MembershipAfter(f.Type, *p).State
	s.members = append(s.members, Member{Principal: p.Principal, Epoch: p.MembershipEpoch, State: st, UpdatedSeq: f.Seq})
	return nil
}

// Membership returns principal's membership of the Group as last applied.
func (s *Store) Membership(groupID string, principal protocol.Actor) (Member, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups[groupID]
	if g == nil {
		return Member{}, false
	}
	m, ok := g.members[memberKey(principal)]
	return m, ok
}

// Members returns every membership of the Group, sorted by principal.
func (s *Store) Members(groupID string) []Member {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups[groupID]
	if g == nil {
		return nil
	}
	out := make([]Member, 0, len(g.members))
	for _, k := range slices.Sorted(maps.Keys(g.members)) {
		out = append(out, g.members[k])
	}
	return out
}

// sortedMembers lists a members map in key order, for stable stored bytes.
func sortedMembers(m map[string]Member) []Member {
	out := make([]Member, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}
