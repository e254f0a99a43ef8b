package queue

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

// Divergence records that a Group's authority contradicts the history this
// store applied, as an authority restored from an older copy does: either
// it sent another document (eventId or signed bytes) at an applied
// sequence, because it issued new events under sequences it had used; or
// its log ends before this store's cursor (MarkAhead: it said so when the
// worker subscribed or ACKed). The log the worker holds and the
// authority's now disagree; the store stops applying the Group (every
// later event of it is refused, not stored), keeps what it holds, and says
// so in every Apply result, in Store.Divergence and in inspect, until the
// operator resyncs the Group.
type Divergence struct {
	GroupID string `json:"groupId"`
	// Sequence is the first sequence known to differ: the contradicted
	// one, or the one after the authority's last.
	Sequence      uint64 `json:"sequence"`
	StoredEventID string `json:"storedEventId"`
	// ReceivedEventID is the authority's event at Sequence; empty when its
	// log ends before it (AuthorityLastSequence).
	ReceivedEventID string `json:"receivedEventId,omitempty"`
	// AuthorityLastSequence is set when the authority's log ends before
	// this store's cursor: the last sequence it holds.
	AuthorityLastSequence *uint64       `json:"authorityLastSequence,omitempty"`
	DetectedAt            protocol.Time `json:"detectedAt"`
}

// Describe says in one phrase what the authority did, for logs and inspect.
func (d Divergence) Describe() string {
	if d.AuthorityLastSequence != nil {
		return fmt.Sprintf("stored event %s, the authority's log ends at %d", orNone(d.StoredEventID), *d.AuthorityLastSequence)
	}
	return fmt.Sprintf("stored event %s, the authority sent %s", orNone(d.StoredEventID), d.ReceivedEventID)
}

func orNone(id string) string {
	if id == "" {
		return "(none: before the inbox)"
	}
	return id
}

var keyDiverged = []byte("diverged")

func (d *Divergence) err() *protocol.Error {
	return protocol.WithDetails(protocol.Errorf(protocol.CodeProtocolViolation,
		"group %s diverged at sequence %d: %s; nothing more of this Group is applied until it is resynced",
		d.GroupID, d.Sequence, d.Describe()), "divergence", d)
}

// compareApplied sorts a batch's events at sequences this store already
// applied: the same signed bytes as the stored event are duplicates; any
// other document is a divergence of its Group. Sequences at or below a
// restored snapshot's have no stored event to compare and count as
// duplicates.
func (s *Store) compareApplied(plans map[string]*groupPlan, res *Result) error {
	now := protocol.NewTime(s.opts.Clock.Now())
	return s.view(func(tx *bolt.Tx) error {
		for _, p := range plans {
			if len(p.applied0) == 0 {
				continue
			}
			var inbox *bolt.Bucket
			if gb := tx.Bucket(bktGroups).Bucket([]byte(p.g.id)); gb != nil {
				inbox = gb.Bucket(bktInbox)
			}
			for _, c := range p.applied0 {
				seq := c.ev.Seq()
				var stored []byte
				if inbox != nil {
					stored = inbox.Get(u64(seq))
				}
				if stored == nil || bytes.Equal(stored, c.in.Raw) {
					res.Duplicates = append(res.Duplicates, c.ref)
					continue
				}
				if p.diverged == nil {
					p.diverged = &Divergence{GroupID: p.g.id, Sequence: seq, StoredEventID: storedEventID(stored),
						ReceivedEventID: c.ev.EventID, DetectedAt: now}
				}
				res.Rejected = append(res.Rejected, Problem{Ref: c.ref, Err: p.diverged.err()})
			}
		}
		return nil
	})
}

// putDivergence records a Group's divergence durably.
func putDivergence(tx *bolt.Tx, d *Divergence) error {
	_, meta, _, _, err := groupBuckets(tx, d.GroupID)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return meta.Put(keyDiverged, raw)
}

func loadDivergence(meta *bolt.Bucket) (*Divergence, error) {
	v := meta.Get(keyDiverged)
	if v == nil {
		return nil, nil
	}
	var d Divergence
	if err := json.Unmarshal(v, &d); err != nil {
		return nil, fmt.Errorf("divergence record: %w", err)
	}
	return &d, nil
}

// Divergence reports whether the Group diverged (see Divergence).
func (s *Store) Divergence(groupID string) (Divergence, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups[groupID]
	if g == nil || g.diverged == nil {
		return Divergence{}, false
	}
	return *g.diverged, true
}

func storedEventID(raw []byte) string {
	var ev struct {
		EventID string `json:"eventId"`
	}
	_ = json.Unmarshal(raw, &ev)
	return ev.EventID
}
