package authoritylite

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/protocol"
)

// The authority's bbolt layout. Every accepted command writes its events,
// the records they changed that the log alone does not give back
// (members, usage, grants, leases, artifacts) and its receipt in one
// transaction, so a crash leaves either all of them or none.
//
// The Group's decision state (Mission, WorkItems, proposals) is what
// group.Fold makes of the log. Its records are a checkpoint: they hold the
// state as of meta "stateSeq" and are rewritten, only those that changed,
// every checkpointEvery events in the same transaction as those events,
// on Close and before compaction; Open folds the events after stateSeq
// onto them. A store without "stateSeq" (written before checkpoints) has
// records as of its last event and gets the marker at open.
//
//	groups/<groupId>/events   sequence (8 bytes BE) -> signed event (JCS)
//	groups/<groupId>/items    workItemId -> WorkItem JSON (checkpoint)
//	groups/<groupId>/proposals proposalId -> Proposal JSON (checkpoint)
//	groups/<groupId>/leases   leaseId -> lease record JSON (created on first write)
//	groups/<groupId>/meta     "mission" (checkpoint), "stateSeq", "members", "usage", ... -> JSON
//	                          "verified": how far the events were verified (verified.go)
//	org/agents                agentId -> agent record JSON
//	org/humans                humanId -> human record JSON
//	org/events                index (8 bytes BE) -> signed org event
//	org/nonces                agentId 0 nonce -> issuedAt (HELLO replay guard)
//	org/nonceTimes            acceptedAt 0 agentId 0 nonce -> nil (the same, by age, to prune; nonce.go)
//	receipts                  kind 0 actorId 0 actionId -> receipt record JSON
//	audit                     index -> late result JSON (never applied)
//	followups                 groupId 0 sequence index -> follow-up owed to another Group (followups.go)
//	released                  groupId -> archive time: archived Groups Open does not read (archive.go, purge.go)
//	purged                    groupId -> last sequence: archived Groups deleted, ids kept (purge.go)
//	receiptsDue               time (8 bytes BE) receipt key -> nil: receipts to delete then (purge.go)
//	log/identity              the log's id, creation time and key (identity.go)
var (
	bucketGroups    = []byte("groups")
	bucketEvents    = []byte("events")
	bucketItems     = []byte("items")
	bucketProposals = []byte("proposals")
	bucketMeta      = []byte("meta")
	bucketLeases    = []byte("leases")
	bucketOrg       = []byte("org")
	bucketAgents    = []byte("agents")
	bucketHumans    = []byte("humans")
	bucketNonces    = []byte("nonces")
	bucketReceipts  = []byte("receipts")
	bucketAudit     = []byte("audit")

	keyMission     = []byte("mission")
	keyMembers     = []byte("members")
	keyUsage       = []byte("usage")
	keyGrants      = []byte("grants")
	keyLeases      = []byte("leases") // every lease record in one value (stores before the leases bucket)
	keyStateSeq    = []byte("stateSeq")
	keyArchived    = []byte("archived")
	keyDescendants = []byte("descendants")
	keyArtifacts   = []byte("artifacts")
)

func seqKey(seq uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return b[:]
}

func receiptKey(a protocol.Actor, actionID string) []byte {
	k := make([]byte, 0, len(a.Kind)+len(a.ID)+len(actionID)+2)
	k = append(k, a.Kind...)
	k = append(k, 0)
	k = append(k, a.ID...)
	k = append(k, 0)
	return append(k, actionID...)
}

// receiptRecord is what the authority keeps per (actor, actionId): the
// digest of the command's canonical bytes, to tell a retry from a
// collision, and the receipt a retry gets back.
type receiptRecord struct {
	Digest  string           `json:"digest"`
	Receipt protocol.Receipt `json:"receipt"`
}

// putter is a bucket or a recorder of puts.
type putter interface{ Put(k, v []byte) error }

func putJSON(b putter, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

func getJSON(b logstore.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("authority store: %s: %w", key, err)
	}
	return true, nil
}

// groupBuckets returns (creating when asked) the buckets of one Group.
// leases is nil in a store that never wrote one, unless create is set.
type groupBuckets struct {
	events, items, proposals, meta, leases logstore.Bucket
	tx                                     logstore.Tx
}

func openGroupBuckets(tx logstore.Tx, groupID string, create bool) (*groupBuckets, error) {
	root := tx.Bucket(bucketGroups)
	g := root.Bucket([]byte(groupID))
	if g == nil {
		if !create {
			return nil, nil
		}
		var err error
		if g, err = root.CreateBucket([]byte(groupID)); err != nil {
			return nil, err
		}
	}
	gb := &groupBuckets{tx: tx}
	for _, p := range []struct {
		name []byte
		dst  *logstore.Bucket
	}{{bucketEvents, &gb.events}, {bucketItems, &gb.items}, {bucketProposals, &gb.proposals}, {bucketMeta, &gb.meta}} {
		b := g.Bucket(p.name)
		if b == nil {
			if !create {
				return nil, fmt.Errorf("authority store: group %s lacks bucket %s", groupID, p.name)
			}
			var err error
			if b, err = g.CreateBucket(p.name); err != nil {
				return nil, err
			}
		}
		*p.dst = b
	}
	gb.leases = g.Bucket(bucketLeases)
	if gb.leases == nil && create {
		var err error
		if gb.leases, err = g.CreateBucket(bucketLeases); err != nil {
			return nil, err
		}
	}
	return gb, nil
}

func createRootBuckets(tx logstore.Tx) error {
	for _, name := range [][]byte{bucketGroups, bucketReceipts, bucketAudit, bucketFollowUps, bucketReleased, bucketPurged, bucketReceiptsDue, bucketGoneFiles} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	org, err := tx.CreateBucketIfNotExists(bucketOrg)
	if err != nil {
		return err
	}
	for _, name := range [][]byte{bucketAgents, bucketHumans, bucketEvents, bucketNonces} {
		if _, err := org.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

func seqFromKey(k []byte) uint64 { return binary.BigEndian.Uint64(k) }

// lastSeq is the highest sequence in an events bucket, 0 when empty.
func lastSeq(b logstore.Bucket) uint64 {
	k, _ := b.Cursor().Last()
	if k == nil {
		return 0
	}
	return binary.BigEndian.Uint64(k)
}
