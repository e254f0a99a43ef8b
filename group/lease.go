package group

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Ownership and leases (spec 11.3, docs/wire.md). Expiry is never an event: it is
// decided from the time passed in, so replaying the log at any speed gives
// the same decisions.

// OwnerActive reports whether the WorkItem has an owner whose grant is still
// in force at now. Only then does work.offer refuse it; an expired owner is
// fenced by the next offer.
func (w *WorkItem) OwnerActive(now time.Time) bool {
	if w.Ownership == nil {
		return false
	}
	switch w.State {
	case protocol.WorkQueued:
		return before(now, w.Ownership.StartDeadline)
	case protocol.WorkActive:
		return w.Lease != nil && before(now, w.Lease.ExpiresAt)
	case protocol.WorkBlocked:
		// A linked child Mission protects ownership while it runs.
		return w.ChildMissionID != "" || (w.BlockedUntil != nil && before(now, *w.BlockedUntil))
	case protocol.WorkSubmitted:
		return true
	}
	return false
}

// CheckOwnership fences a command naming an ownership epoch: an epoch older
// than the current grant, or one whose grant was fenced, is
// WORK_STALE_OWNERSHIP; an epoch never granted is INVALID_COMMAND; a sender
// other than the owner is AUTH_FORBIDDEN.
func (w *WorkItem) CheckOwnership(agentID string, epoch uint64) error {
	if epoch > w.LastOwnershipEpoch {
		return protocol.InvalidCommand("ownership epoch %d was never granted for WorkItem %s", epoch, w.WorkItemID).At("/payload/ownershipEpoch")
	}
	if w.Ownership == nil || epoch < w.Ownership.OwnershipEpoch {
		e := protocol.Errorf(protocol.CodeWorkStaleOwnership, "ownership epoch %d of WorkItem %s is fenced", epoch, w.WorkItemID)
		if w.Ownership != nil {
			protocol.WithDetails(e, "ownershipEpoch", w.Ownership.OwnershipEpoch)
		}
		return e
	}
	if agentID != w.Ownership.OwnerAgentID {
		return protocol.Forbidden("%s does not own WorkItem %s", agentID, w.WorkItemID)
	}
	return nil
}

// CheckLease verifies that a worker command names the current execution
// lease (spec 11.3): ownership first, then the lease id, the lease's session
// and its expiry. An older lease id is WORK_LEASE_EXPIRED even under the same
// ownership epoch. The pipeline uses it for artifact.publish and usage
// records too.
func (w *WorkItem) CheckLease(agentID string, sessionEpoch *uint64, epoch uint64, leaseID string, now time.Time) error {
	if err := w.CheckOwnership(agentID, epoch); err != nil {
		return err
	}
	l := w.Lease
	if l == nil || l.LeaseID != leaseID {
		return protocol.Errorf(protocol.CodeWorkLeaseExpired, "lease %s is not the current execution lease of WorkItem %s", leaseID, w.WorkItemID).At("/payload/leaseId")
	}
	if sessionEpoch != nil && *sessionEpoch != l.SessionEpoch {
		// A replacement session gets new grants; the old lease does not
		// carry over (spec 11.3).
		return protocol.Errorf(protocol.CodeWorkLeaseExpired, "lease %s belongs to session epoch %d", leaseID, l.SessionEpoch)
	}
	if !before(now, l.ExpiresAt) {
		return protocol.WithDetails(protocol.Errorf(protocol.CodeWorkLeaseExpired, "lease %s expired at %s", leaseID, l.ExpiresAt), "expiresAt", l.ExpiresAt.String())
	}
	return nil
}

// newLease issues an execution lease with a fresh, stable id derived from
// the WorkItem, its ownership epoch and the lease count, so replay derives
// the same id.
func (w *WorkItem) newLease(sessionEpoch uint64, now time.Time, d time.Duration) *protocol.ExecutionLease {
	w.LeaseSeq++
	h := sha256.New()
	h.Write([]byte(w.WorkItemID))
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], w.Ownership.OwnershipEpoch)
	binary.BigEndian.PutUint64(buf[8:], w.LeaseSeq)
	h.Write(buf[:])
	id := "lease-" + hex.EncodeToString(h.Sum(nil))[:32]
	return &protocol.ExecutionLease{
		LeaseID: id, AgentID: w.Ownership.OwnerAgentID, SessionEpoch: sessionEpoch,
		WorkItemID: w.WorkItemID, OwnershipEpoch: w.Ownership.OwnershipEpoch,
		StartedAt: protocol.NewTime(now), Renewals: protocol.List[protocol.Time]{},
		ExpiresAt: protocol.NewTime(now.Add(d)),
	}
}

// fenceExpiredOwner drops an ownership that is no longer in force and
// returns its epoch; the epoch stays spent.
func (w *WorkItem) fenceExpiredOwner(now time.Time) *uint64 {
	if w.Ownership == nil || w.OwnerActive(now) {
		return nil
	}
	epoch := w.Ownership.OwnershipEpoch
	releaseAll(w)
	return &epoch
}

// releaseAll revokes offer, ownership and lease (fail, cancel, fencing).
func releaseAll(w *WorkItem) {
	w.Offer = nil
	w.Ownership = nil
	w.Lease = nil
	w.BlockedUntil = nil
	w.AcceptedRevision = 0
	w.WonOfferID = ""
	w.ChildMissionID, w.ChildGroupID, w.ChildFailure = "", "", ""
}

func copyGrant(g *protocol.OwnershipGrant) *protocol.OwnershipGrant {
	if g == nil {
		return nil
	}
	c := *g
	return &c
}

func copyLease(l *protocol.ExecutionLease) *protocol.ExecutionLease {
	if l == nil {
		return nil
	}
	c := *l
	c.Renewals = append(protocol.List[protocol.Time]{}, l.Renewals...)
	return &c
}
