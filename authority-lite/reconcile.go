package authoritylite

import (
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/protocol"
)

// leaseRecord is what the authority remembers of every execution lease, so
// a buffered offline command can be checked against the lease it ran under
// after that lease is gone (spec 11.5).
type leaseRecord struct {
	LeaseID        string     `json:"leaseId"`
	AgentID        string     `json:"agentId"`
	SessionEpoch   uint64     `json:"sessionEpoch"`
	WorkItemID     string     `json:"workItemId"`
	OwnershipEpoch uint64     `json:"ownershipEpoch"`
	StartedAt      time.Time  `json:"startedAt"`
	ExpiresAt      time.Time  `json:"expiresAt"`
	ClosedAt       *time.Time `json:"closedAt,omitempty"`
}

// indexOpenLeases rebuilds openLeases from the lease records.
func (gs *groupState) indexOpenLeases() {
	gs.openLeases = map[string][]*leaseRecord{}
	for _, rec := range gs.leases {
		if rec.ClosedAt == nil {
			gs.openLeases[rec.WorkItemID] = append(gs.openLeases[rec.WorkItemID], rec)
		}
	}
}

// trackLeases updates the lease records of the WorkItems events touched:
// a new or renewed lease is recorded; a lease no longer on its item is
// closed at now. It returns the ids of the records it changed.
func (s *Service) trackLeases(gs *groupState, drafts []group.EventDraft, now time.Time) []string {
	var changed []string
	seen := map[string]bool{}
	for _, d := range drafts {
		id := d.Aggregate.ID
		if d.Aggregate.Kind != protocol.AggregateWorkItem || seen[id] {
			continue
		}
		seen[id] = true
		w := gs.g.Items[id]
		if w == nil {
			continue
		}
		open := gs.openLeases[id][:0]
		for _, rec := range gs.openLeases[id] {
			if w.Lease == nil || w.Lease.LeaseID != rec.LeaseID {
				at := now
				rec.ClosedAt = &at
				changed = append(changed, rec.LeaseID)
			} else {
				open = append(open, rec)
			}
		}
		gs.openLeases[id] = open
		if len(open) == 0 {
			delete(gs.openLeases, id)
		}
		if l := w.Lease; l != nil {
			rec := gs.leases[l.LeaseID]
			fresh := rec == nil
			if fresh {
				rec = &leaseRecord{LeaseID: l.LeaseID, AgentID: l.AgentID, SessionEpoch: l.SessionEpoch, WorkItemID: id, OwnershipEpoch: l.OwnershipEpoch, StartedAt: l.StartedAt.Time}
				gs.leases[l.LeaseID] = rec
				gs.openLeases[id] = append(gs.openLeases[id], rec)
			}
			if fresh || !rec.ExpiresAt.Equal(l.ExpiresAt.Time) {
				rec.ExpiresAt = l.ExpiresAt.Time
				changed = append(changed, l.LeaseID)
			}
		}
	}
	return changed
}

// OfflineGrace is the grace the authority allows past a lease's expiry for
// buffered offline work, unless Config.OfflineGrace says otherwise.
const OfflineGrace = offline.DefaultGrace

// reconcile decides a command buffered offline and rebased on reconnect
// (spec 11.5): the binding is checked against the historical lease, each
// non-zero usage delta is charged with resource_usage_recorded (naming the
// historical and the reconciling session), then the command applies — on
// the live lease if it is still the current one, else as a historical
// fact. A budget overflow or any refusal leaves nothing behind.
func (s *Service) reconcile(c *call, gs *groupState, p *pending) error {
	b, err := offline.BindingOf(c.cmd)
	if err != nil {
		return err
	}
	w := gs.g.Items[b.WorkItemID]
	if w == nil {
		return protocol.InvalidCommand("work item %s not found", b.WorkItemID).At("/extensions/" + protocol.OfflineExtensionURI + "/data/workItemId")
	}
	rec := gs.leases[b.HistoricalLeaseID]
	if rec == nil {
		return protocol.Errorf(protocol.CodeWorkLeaseExpired, "lease %s is unknown to this Group", b.HistoricalLeaseID)
	}
	hist := offline.LeaseHistory{LeaseID: rec.LeaseID, AgentID: rec.AgentID, SessionEpoch: rec.SessionEpoch, WorkItemID: rec.WorkItemID,
		OwnershipEpoch: rec.OwnershipEpoch, StartedAt: rec.StartedAt, ExpiresAt: rec.ExpiresAt, ClosedAt: rec.ClosedAt, Grace: s.offlineGrace()}
	if w.Ownership != nil {
		hist.CurrentOwner, hist.CurrentOwnershipEpoch = w.Ownership.OwnerAgentID, w.Ownership.OwnershipEpoch
	}
	if err := offline.CheckBuffered(b, hist, c.now); err != nil {
		return err
	}
	if pl, ok := c.payload.(*protocol.PostMessagePayload); ok {
		reply := ""
		if r := s.messages(gs)[pl.ReplyTo]; pl.ReplyTo != "" && r != nil {
			reply = r.ConversationID
		}
		if err := offline.CheckBufferedMessage(b, pl, reply); err != nil {
			return err
		}
		d, err := s.messages(gs).DecideMessage(gs.g, group.InputFromCommand(c.cmd, c.payload))
		return decided(gs, p, d, err)
	}
	// Charge first, remembering what to restore if the command fails.
	oldItem, oldUsage := gs.g.Items[w.WorkItemID], gs.usage[w.WorkItemID]
	reconciling := uint64(0)
	if c.cmd.SessionEpoch != nil {
		reconciling = *c.cmd.SessionEpoch
	}
	if !b.UsageDelta.IsZero() {
		if err := s.charge(gs, w, c.cmd.Actor, b.OwnershipEpoch, b.HistoricalLeaseID, b.UsageDelta, b.OriginalSessionEpoch, reconciling, p); err != nil {
			return err
		}
	}
	restore := func() {
		gs.g.Items[w.WorkItemID], gs.usage[w.WorkItemID] = oldItem, oldUsage
		p.drafts = nil
		s.releaseAncestors(p)
	}
	if c.cmd.Type == protocol.CmdResourceUsageRecord {
		return nil // the binding's delta is the charge
	}
	in := group.InputFromCommand(c.cmd, c.payload)
	cur := gs.g.Items[w.WorkItemID]
	var out group.Outcome
	if cur.Lease != nil && cur.Lease.LeaseID == b.HistoricalLeaseID && c.now.Before(cur.Lease.ExpiresAt.Time) {
		out, err = gs.g.Apply(in, c.now)
	} else {
		out, err = gs.g.ApplyHistorical(in, b.HistoricalLeaseID, c.now)
	}
	if err != nil {
		restore()
		return err
	}
	p.drafts = append(p.drafts, out.Events...)
	return nil
}

func (s *Service) offlineGrace() time.Duration {
	if s.cfg.OfflineGrace != 0 {
		return s.cfg.OfflineGrace
	}
	return OfflineGrace
}
