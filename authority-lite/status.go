package authoritylite

import (
	"sort"

	"github.com/missionweave/mwp-worker/protocol"
)

// Status is what a running authority reports of itself (`mwp-worker
// authority inspect`): its identity, whether its log is writable, every
// Group's Mission and log head, and every agent's session.
type Status struct {
	ID       string        `json:"id"`
	EventKey string        `json:"eventKey"`
	Dir      string        `json:"dir"`
	Writable bool          `json:"writable"`
	Err      string        `json:"err,omitempty"`
	Groups   []GroupStatus `json:"groups"`
	Agents   []AgentStatus `json:"agents"`
}

// GroupStatus is one Group as the authority holds it.
type GroupStatus struct {
	GroupID      string                         `json:"groupId"`
	MissionID    string                         `json:"missionId,omitempty"`
	MissionState protocol.MissionState          `json:"missionState,omitempty"`
	LastSequence uint64                         `json:"lastSequence"`
	Archived     bool                           `json:"archived,omitempty"`
	Members      int                            `json:"members"`
	Items        map[protocol.WorkItemState]int `json:"items"`
}

// AgentStatus is one registered agent and its current session.
type AgentStatus struct {
	AgentID      string `json:"agentId"`
	SessionEpoch uint64 `json:"sessionEpoch"`
}

// Status reads the authority's state now; each Group is read under its
// lock, so a Group's numbers agree with each other.
func (s *Service) Status() Status {
	st := Status{ID: s.cfg.ID, EventKey: s.key.KeyID, Dir: s.cfg.Dir, Writable: s.Err() == nil, Groups: []GroupStatus{}, Agents: []AgentStatus{}}
	if err := s.Err(); err != nil {
		st.Err = err.Error()
	}
	for _, id := range s.GroupIDs() {
		gs := s.peekGroup(id) // an archived Group's items are not in memory
		if gs == nil {
			continue // purged since listed
		}
		gs.mu.Lock()
		g := GroupStatus{GroupID: id, LastSequence: gs.last, Archived: gs.archived, Members: len(gs.members), Items: map[protocol.WorkItemState]int{}}
		if m := gs.g.Mission; m != nil {
			g.MissionID, g.MissionState = m.MissionID, m.State
		}
		for _, w := range gs.g.Items {
			g.Items[w.State]++
		}
		gs.mu.Unlock()
		st.Groups = append(st.Groups, g)
	}
	s.org.mu.RLock()
	for id, a := range s.org.agents {
		st.Agents = append(st.Agents, AgentStatus{AgentID: id, SessionEpoch: a.SessionEpoch})
	}
	s.org.mu.RUnlock()
	sort.Slice(st.Agents, func(i, j int) bool { return st.Agents[i].AgentID < st.Agents[j].AgentID })
	return st
}
