package offline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// CurrentSession is the authenticated session a buffered command is rebased
// onto.
type CurrentSession struct {
	SessionEpoch     uint64
	MembershipEpochs map[string]uint64 // per groupId
	Now              time.Time
}

// ReuseRebasedFor is how long Prepare keeps resending a persisted rebase
// under the same session and membership: half the authority's freshness
// window, so the bytes it resends are never refused as stale.
const ReuseRebasedFor = protocol.DefaultMaxSkew / 2

// Rebase re-signs a buffered command for the current session (spec 11.5):
// issuedAt becomes s.Now and sessionEpoch and membershipEpoch those of the
// session; payload, extensions (the binding with its originalSessionEpoch
// and historical lease) and every other member stay as buffered.
//
// The actionId stays too. Spec 15.1 makes (actor, actionId) the unit the
// authority applies at most once: a rebased command is new content under
// the same actionId, which the authority accepts only if it never accepted
// that actionId, and answers with ACTION_ID_COLLISION if an earlier rebase
// of the entry was accepted. The offline-signed original is never sent, so
// it cannot collide. A fresh actionId per rebase would instead let a second
// disconnect during reconciliation charge the same offline work twice.
func Rebase(e Entry, s CurrentSession, key protocol.PrivateKey) ([]byte, error) {
	var cmd protocol.Command
	if err := protocol.DecodeExact(e.Signed, &cmd, protocol.CodeInvalidCommand); err != nil {
		return nil, err
	}
	b, err := BindingOf(&cmd)
	if err != nil {
		return nil, err
	}
	if !sameBinding(b, e.Binding) || cmd.ActionID != e.ActionID {
		return nil, fmt.Errorf("offline: entry %d does not match its signed command", e.ID)
	}
	me, ok := s.MembershipEpochs[cmd.GroupID]
	if !ok {
		return nil, protocol.Errorf(protocol.CodeMembershipRequired, "offline: no membership epoch for Group %s in the current session", cmd.GroupID)
	}
	if !protocol.KeyBelongsTo(key.KeyID, cmd.Actor.Kind, cmd.Actor.ID) {
		return nil, fmt.Errorf("offline: key %s is not a key of %s:%s", key.KeyID, cmd.Actor.Kind, cmd.Actor.ID)
	}
	cmd.IssuedAt = protocol.NewTime(s.Now)
	cmd.SessionEpoch = protocol.Uint64(s.SessionEpoch)
	cmd.MembershipEpoch = protocol.Uint64(me)
	return protocol.SignedCommand(&cmd, key)
}

func sameBinding(a, b protocol.OfflineBinding) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// Prepare returns the bytes to send for entry id under session s, durably
// persisted before they are returned: a crash or a lost receipt then leads
// to a byte-identical resend, which the authority answers with the original
// receipt. The persisted rebase is reused while the session and the Group's
// membership epoch are unchanged and it is younger than ReuseRebasedFor;
// otherwise the entry is rebased again (same actionId, see Rebase).
func (b *Buffer) Prepare(id uint64, s CurrentSession, key protocol.PrivateKey) ([]byte, error) {
	e, err := b.Get(id)
	if err != nil {
		return nil, err
	}
	if r := e.Rebased; r != nil {
		me, ok := s.MembershipEpochs[e.GroupID]
		age := s.Now.Sub(r.IssuedAt)
		if ok && r.SessionEpoch == s.SessionEpoch && r.MembershipEpoch == me && age >= 0 && age < ReuseRebasedFor {
			return r.Raw, nil
		}
	}
	raw, err := Rebase(e, s, key)
	if err != nil {
		return nil, err
	}
	rec, err := encodeRecord(rebasedHeader{
		SessionEpoch: s.SessionEpoch, MembershipEpoch: s.MembershipEpochs[e.GroupID], IssuedAt: protocol.NewTime(s.Now),
	}, raw)
	if err != nil {
		return nil, err
	}
	err = b.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(bktRoot)
		if root.Bucket(bktEntries).Get(u64(id)) == nil {
			return fmt.Errorf("%w: %d (removed while rebasing)", ErrNotFound, id)
		}
		return root.Bucket(bktRebased).Put(u64(id), rec)
	})
	if err != nil {
		return nil, err
	}
	return raw, nil
}

// Outcome is what to do with a buffered entry after the authority answered
// its rebased command.
type Outcome int

// The four outcomes (see Classify).
const (
	// Applied: a receipt, or ACTION_ID_COLLISION — an earlier rebase of
	// the entry was accepted and its receipt lost. Remove the entry.
	Applied Outcome = iota
	// Refused: rejected for good (lease window, ownership, budget, ...).
	// Remove the entry and report the error; nothing of it was applied.
	Refused
	// Resend: a transient failure; resend the same bytes later.
	Resend
	// Retry: the session, membership or freshness moved on; call Prepare
	// with the current session and send what it returns.
	Retry
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Refused:
		return "refused"
	case Resend:
		return "resend"
	case Retry:
		return "retry"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Classify maps the authority's answer to a rebased command (nil for a
// receipt) to an Outcome. An error without a protocol code (a broken
// connection) counts as INTERNAL_ERROR: resend unchanged.
func Classify(err error) Outcome {
	if err == nil {
		return Applied
	}
	code := protocol.CodeOf(err)
	switch code {
	case protocol.CodeActionIDCollision:
		return Applied
	case protocol.CodeAuthRequired, protocol.CodeAuthStaleSession, protocol.CodeMembershipStale:
		return Retry
	case protocol.CodeAuthInvalidSignature:
		// Stale or future issuedAt is a freshness failure: re-sign.
		// Anything else about the signature will not improve by retrying.
		var pe *protocol.Error
		if errors.As(err, &pe) && (pe.Pointer == "/issuedAt" || pe.Details["pointer"] == "/issuedAt") {
			return Retry
		}
		return Refused
	}
	if code.Retryable() {
		return Resend
	}
	return Refused
}
