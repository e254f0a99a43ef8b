package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"
)

// Key is the namespace of one execution: a WorkItem of a Group under one
// ownership epoch. Each slot writes only under its own Key.
type Key struct {
	GroupID        string
	WorkItemID     string
	OwnershipEpoch uint64
}

// Meta is the small description a handler attaches to a checkpoint.
type Meta struct {
	Phase string `json:"phase,omitempty"`
	Note  string `json:"note,omitempty"`
}

// Checkpoint is one durable checkpoint. State is nil in List results.
type Checkpoint struct {
	ID  string
	Key Key
	// Seq numbers the checkpoints of a WorkItem from 1 across all epochs.
	Seq uint64
	At  time.Time
	Meta
	// Digest is "sha256:<hex>" of State: the stateDigest of work.checkpoint.
	Digest string
	Size   int64
	// Blob reports that State lives in a content-addressed file.
	Blob  bool
	State []byte
}

// header is the JSON part of a stored record.
type header struct {
	ID         string `json:"id"`
	GroupID    string `json:"groupId"`
	WorkItemID string `json:"workItemId"`
	Epoch      uint64 `json:"ownershipEpoch"`
	Seq        uint64 `json:"seq"`
	At         string `json:"at"`
	Phase      string `json:"phase,omitempty"`
	Note       string `json:"note,omitempty"`
	Digest     string `json:"digest"`
	Size       int64  `json:"size"`
	Blob       bool   `json:"blob,omitempty"`
}

// encodeRecord lays a record out as uvarint(len(header)) header inline,
// where inline is the state for a non-blob checkpoint and empty otherwise.
func encodeRecord(c *Checkpoint, inline []byte) ([]byte, error) {
	h, err := json.Marshal(header{
		ID: c.ID, GroupID: c.Key.GroupID, WorkItemID: c.Key.WorkItemID, Epoch: c.Key.OwnershipEpoch,
		Seq: c.Seq, At: c.At.UTC().Format(time.RFC3339Nano), Phase: c.Phase, Note: c.Note,
		Digest: c.Digest, Size: c.Size, Blob: c.Blob,
	})
	if err != nil {
		return nil, err
	}
	out := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(h)+len(inline)), uint64(len(h)))
	out = append(out, h...)
	return append(out, inline...), nil
}

// decodeRecord parses a stored record; the returned inline bytes alias b.
// Any inconsistency is ErrCorrupt: records are only ever written whole.
func decodeRecord(b []byte) (Checkpoint, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return Checkpoint{}, nil, fmt.Errorf("%w: record header length", ErrCorrupt)
	}
	var h header
	if err := json.Unmarshal(b[w:w+int(n)], &h); err != nil {
		return Checkpoint{}, nil, fmt.Errorf("%w: record header: %v", ErrCorrupt, err)
	}
	at, err := time.Parse(time.RFC3339Nano, h.At)
	if err != nil {
		return Checkpoint{}, nil, fmt.Errorf("%w: record time: %v", ErrCorrupt, err)
	}
	inline := b[w+int(n):]
	switch {
	case h.Size < 0 || len(h.Digest) != len("sha256:")+64:
		return Checkpoint{}, nil, fmt.Errorf("%w: record %q has a bad size or digest", ErrCorrupt, h.ID)
	case h.Blob && len(inline) != 0:
		return Checkpoint{}, nil, fmt.Errorf("%w: blob record %q carries inline state", ErrCorrupt, h.ID)
	case !h.Blob && int64(len(inline)) != h.Size:
		return Checkpoint{}, nil, fmt.Errorf("%w: record %q holds %d state bytes, header says %d", ErrCorrupt, h.ID, len(inline), h.Size)
	}
	return Checkpoint{
		ID:     h.ID,
		Key:    Key{GroupID: h.GroupID, WorkItemID: h.WorkItemID, OwnershipEpoch: h.Epoch},
		Seq:    h.Seq,
		At:     at,
		Meta:   Meta{Phase: h.Phase, Note: h.Note},
		Digest: h.Digest,
		Size:   h.Size,
		Blob:   h.Blob,
	}, inline, nil
}

// itemPrefix is the index prefix of one WorkItem. Ids never contain 0x00
// (validID), so no item's prefix is a prefix of another's.
func itemPrefix(group, item string) []byte {
	p := make([]byte, 0, len(group)+len(item)+2)
	p = append(p, group...)
	p = append(p, 0)
	p = append(p, item...)
	return append(p, 0)
}

// indexKey orders an item's checkpoints by (ownership epoch, seq).
func indexKey(k Key, seq uint64) []byte {
	p := itemPrefix(k.GroupID, k.WorkItemID)
	p = binary.BigEndian.AppendUint64(p, k.OwnershipEpoch)
	return binary.BigEndian.AppendUint64(p, seq)
}

// validID reports whether s is a wire id (docs/wire.md).
func validID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != ':' && c != '-') {
			return false
		}
	}
	return true
}
