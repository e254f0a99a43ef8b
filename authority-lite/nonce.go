package authoritylite

import (
	"encoding/binary"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/protocol"
)

// HELLO nonces (docs/wire.md "Limits"). A proof is fresh only within the
// skew of the authority's clock, so a proof accepted at t can be replayed
// fresh only until t + 2×skew: a nonce is remembered exactly that long,
// durably, so a restart does not reopen the window.
//
//	org/nonces      agentId 0 nonce -> accept time (RFC 3339)
//	org/nonceTimes  accept time (8 bytes BE, Unix ns) agentId 0 nonce -> ""
//
// nonceTimes orders the nonces by age, so a HELLO prunes the expired ones
// from its front and looks its own up by key: O(log n) plus the expired
// ones, at most maxNoncePrune per HELLO, instead of a scan of every stored
// nonce. An entry past the window that is not pruned yet counts as absent.
var bucketNonceTimes = []byte("nonceTimes")

// maxNoncePrune bounds the expired nonces one HELLO deletes; the rest go
// with the next ones (each HELLO adds one and removes up to this many).
const maxNoncePrune = 1024

// useNonce records a proof nonce; one used within 2×skew is refused.
func (s *Service) useNonce(agentID, nonce string, now time.Time, skew time.Duration) error {
	if nonce == "" {
		return protocol.Errorf(protocol.CodeAuthInvalidSignature, "the proof needs a nonce").At("/proof/nonce")
	}
	if !s.org.nonceIndexed.Load() {
		// Its own transaction: a refused HELLO must not roll the index back.
		if err := s.db.Update(func(tx logstore.Tx) error {
			org := tx.Bucket(bucketOrg)
			_, err := nonceIndex(org, org.Bucket(bucketNonces))
			return err
		}); err != nil {
			return protocol.Errorf(protocol.CodeInternalError, "nonce index: %v", err)
		}
		s.org.nonceIndexed.Store(true)
	}
	key := []byte(agentID + "\x00" + nonce)
	cutoff := now.Add(-2 * skew)
	return s.db.Update(func(tx logstore.Tx) error {
		org := tx.Bucket(bucketOrg)
		b, idx := org.Bucket(bucketNonces), org.Bucket(bucketNonceTimes)
		if v := b.Get(key); v != nil {
			t, err := time.Parse(time.RFC3339Nano, string(v))
			if err != nil || !t.Before(cutoff) {
				return protocol.Errorf(protocol.CodeAuthInvalidSignature, "proof nonce was already used").At("/proof/nonce")
			}
			if err := idx.Delete(nonceTimeKey(t, key)); err != nil {
				return err
			}
		}
		if err := pruneNonces(b, idx, cutoff); err != nil {
			return err
		}
		if err := b.Put(key, []byte(now.UTC().Format(time.RFC3339Nano))); err != nil {
			return err
		}
		return idx.Put(nonceTimeKey(now, key), nil)
	})
}

func nonceTimeKey(t time.Time, key []byte) []byte {
	k := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(k, uint64(max(0, t.UnixNano())))
	return append(k, key...)
}

// pruneNonces deletes, oldest first, nonces accepted before cutoff.
func pruneNonces(b, idx logstore.Bucket, cutoff time.Time) error {
	limit := nonceTimeKey(cutoff, nil)
	c := idx.Cursor()
	for range maxNoncePrune {
		k, _ := c.First()
		if k == nil || string(k[:8]) >= string(limit) {
			return nil
		}
		if err := b.Delete(k[8:]); err != nil {
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// nonceIndex returns org/nonceTimes, building it once from org/nonces for
// a store written before it existed.
func nonceIndex(org, b logstore.Bucket) (logstore.Bucket, error) {
	if idx := org.Bucket(bucketNonceTimes); idx != nil {
		return idx, nil
	}
	idx, err := org.CreateBucket(bucketNonceTimes)
	if err != nil {
		return nil, err
	}
	var bad [][]byte
	err = b.ForEach(func(k, v []byte) error {
		t, err := time.Parse(time.RFC3339Nano, string(v))
		if err != nil {
			bad = append(bad, append([]byte(nil), k...))
			return nil
		}
		return idx.Put(nonceTimeKey(t, k), nil)
	})
	for _, k := range bad {
		if err == nil {
			err = b.Delete(k)
		}
	}
	return idx, err
}
