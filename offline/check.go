package offline

import (
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// LeaseHistory is a historical execution lease as the authority knows it,
// looked up by the binding's historicalLeaseId.
type LeaseHistory struct {
	LeaseID        string
	AgentID        string
	SessionEpoch   uint64 // the session the lease was granted under
	WorkItemID     string
	OwnershipEpoch uint64
	StartedAt      time.Time
	// ExpiresAt is the latest expiry the authority granted (after every
	// renewal it accepted).
	ExpiresAt time.Time
	// ClosedAt is when the lease was released (checkpoint, block, submit) or
	// revoked (session replacement, reassignment, cancellation, failure);
	// nil while it is live or merely timed out, which the grace covers.
	ClosedAt *time.Time
	// The WorkItem's owner and ownership epoch now; "" when it has none.
	CurrentOwner          string
	CurrentOwnershipEpoch uint64
	// Grace is the authority's grace policy, read as ClampGrace reads it.
	Grace time.Duration
}

// CheckBuffered is the authority's check of a rebased offline command's
// binding against the historical lease (spec 11.5), pure and given the
// authority's time. Run it after BindingOf, which ties the binding to the
// command. The codes, in the order checked:
//   - INVALID_COMMAND: the binding contradicts itself (times out of order, a
//     grace beyond MaxGrace, buffered in the future) or the lease it names
//     (other WorkItem, lease id, ownership epoch or session, an expiry the
//     authority never granted) — it is malformed, not late.
//   - AUTH_FORBIDDEN: the historical lease belongs to another agent, as
//     for any command naming someone else's lease.
//   - WORK_STALE_OWNERSHIP: the WorkItem changed owner or ownership epoch
//     since (spec 11.5 "for a changed owner"; docs/wire.md: older epoch).
//   - WORK_LEASE_EXPIRED: buffered at or after the lease closed, before it
//     started, or at or after the end of its grace window — the binding's
//     own graceDeadline or the authority's expiry plus its grace, whichever
//     is first, and no grace at all if the lease had expired before the
//     disconnect. It is the code for any command outside its lease.
func CheckBuffered(b protocol.OfflineBinding, hist LeaseHistory, now time.Time) error {
	disc, buf, dl, hexp := b.DisconnectedAt.Time, b.BufferedAt.Time, b.GraceDeadline.Time, b.HistoricalLeaseExpiresAt.Time
	const data = "/extensions/" + protocol.OfflineExtensionURI + "/data"
	switch {
	case b.AgentID == "" || b.GroupID == "" || b.WorkItemID == "" || b.HistoricalLeaseID == "":
		return invalid(data, "binding names no agent, Group, WorkItem or lease")
	case buf.Before(disc):
		return invalid(data+"/bufferedAt", "buffered at %s, before the disconnect at %s", b.BufferedAt, b.DisconnectedAt)
	case dl.Before(hexp):
		return invalid(data+"/graceDeadline", "grace deadline %s is before the lease expiry %s", b.GraceDeadline, b.HistoricalLeaseExpiresAt)
	case dl.After(hexp.Add(MaxGrace)):
		return invalid(data+"/graceDeadline", "grace deadline %s exceeds the lease expiry %s by more than %s", b.GraceDeadline, b.HistoricalLeaseExpiresAt, MaxGrace)
	case buf.After(now.Add(protocol.DefaultMaxSkew)):
		return invalid(data+"/bufferedAt", "buffered at %s, in the future", b.BufferedAt)
	case b.HistoricalLeaseID != hist.LeaseID || b.WorkItemID != hist.WorkItemID:
		return invalid(data+"/historicalLeaseId", "lease %s of WorkItem %s is not the lease %s of WorkItem %s", b.HistoricalLeaseID, b.WorkItemID, hist.LeaseID, hist.WorkItemID)
	case b.AgentID != hist.AgentID:
		return protocol.Errorf(protocol.CodeAuthForbidden, "lease %s belongs to %s, not %s", hist.LeaseID, hist.AgentID, b.AgentID).At(data + "/agentId")
	case b.OwnershipEpoch != hist.OwnershipEpoch:
		return invalid(data+"/ownershipEpoch", "lease %s was granted under ownership epoch %d, not %d", hist.LeaseID, hist.OwnershipEpoch, b.OwnershipEpoch)
	case b.OriginalSessionEpoch != hist.SessionEpoch:
		return invalid(data+"/originalSessionEpoch", "lease %s was granted under session epoch %d, not %d", hist.LeaseID, hist.SessionEpoch, b.OriginalSessionEpoch)
	case hexp.After(hist.ExpiresAt):
		return invalid(data+"/historicalLeaseExpiresAt", "lease %s never ran until %s (expires %s)", hist.LeaseID, b.HistoricalLeaseExpiresAt, protocol.NewTime(hist.ExpiresAt))
	case hist.CurrentOwner != hist.AgentID || hist.CurrentOwnershipEpoch != hist.OwnershipEpoch:
		return protocol.Errorf(protocol.CodeWorkStaleOwnership, "WorkItem %s changed owner since lease %s (now %q at epoch %d)",
			hist.WorkItemID, hist.LeaseID, hist.CurrentOwner, hist.CurrentOwnershipEpoch)
	case hist.ClosedAt != nil && !buf.Before(*hist.ClosedAt):
		return expired(hist, "buffered at %s, after lease %s closed at %s", b.BufferedAt, hist.LeaseID, protocol.NewTime(*hist.ClosedAt))
	case buf.Before(hist.StartedAt):
		return expired(hist, "buffered at %s, before lease %s started", b.BufferedAt, hist.LeaseID)
	}
	end := GraceDeadline(hist.ExpiresAt, disc, hist.Grace)
	if dl.Before(end) {
		end = dl
	}
	if !buf.Before(end) {
		return expired(hist, "buffered at %s, outside the window of lease %s that ended at %s", b.BufferedAt, hist.LeaseID, protocol.NewTime(end))
	}
	return nil
}

// WorkItemConversation is the conversation a WorkItem's messages belong
// to: the one whose id is the WorkItem id (docs/wire.md).
func WorkItemConversation(workItemID string) string { return workItemID }

// CheckBufferedMessage bounds a buffered message.post to its WorkItem's
// conversation (spec 11.5): the binding's lease authorizes talk about that
// WorkItem and nothing else. Run it after CheckBuffered. replyConversation
// is the conversation of the message p replies to, "" when p replies to
// nothing or to a message the Group does not have. AUTH_FORBIDDEN at the
// member that leaves the bound, with details.conversationId the bound.
func CheckBufferedMessage(b protocol.OfflineBinding, p *protocol.PostMessagePayload, replyConversation string) error {
	bound := WorkItemConversation(b.WorkItemID)
	refuse := func(ptr, format string, args ...any) error {
		e := protocol.Errorf(protocol.CodeAuthForbidden, format, args...).At(ptr)
		e.Details = map[string]any{"conversationId": bound}
		return e
	}
	switch {
	case p.ConversationID != bound:
		return refuse("/payload/conversationId", "a message buffered offline under the lease of WorkItem %s belongs to its conversation %s, not %s", b.WorkItemID, bound, p.ConversationID)
	case p.ReplyTo != "" && replyConversation != bound:
		return refuse("/payload/replyTo", "a message buffered offline replies only within conversation %s", bound)
	}
	return nil
}

func expired(hist LeaseHistory, format string, args ...any) *protocol.Error {
	e := protocol.Errorf(protocol.CodeWorkLeaseExpired, format, args...).At("/extensions/" + protocol.OfflineExtensionURI + "/data/bufferedAt")
	e.Details = map[string]any{"leaseId": hist.LeaseID, "expiresAt": protocol.NewTime(hist.ExpiresAt).String()}
	return e
}
