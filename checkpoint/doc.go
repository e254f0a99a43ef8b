// Package checkpoint stores durable checkpoints keyed by WorkItem and
// ownership epoch, so preempted, restarted or reassigned work resumes from its
// last safe point (spec 11.3).
//
// A Store lives in the "checkpoints" bucket of a bbolt file it does not own
// (the worker's store, queue.Store.DB) plus a directory of blob files.
// Each checkpoint has an id (a wire id, "cp-…"), a per-WorkItem sequence
// number counted across epochs, the caller's time, small metadata (phase,
// note) and its state bytes. Its Digest, "sha256:<hex>" of the state, is
// the stateDigest a work.checkpoint or work.block names, next to its id.
//
// # Layout (checkpoints bucket, SchemaVersion 1)
//
//	checkpoints/
//	|--> meta/     schema -> uint64 BE
//	|--> records/  checkpointId -> uvarint(len(header)) header(JSON) [state]
//	|--> index/    groupId 0x00 workItemId 0x00 epoch(8 BE) seq(8 BE) -> checkpointId
//	|--> blobs/    sha256 hex -> uint64 BE reference count
//
// State up to Options.InlineMax (16 KiB) is kept in the record; larger
// state is a content-addressed file BLOBDIR/<sha256 hex>, written to a
// temp file, fsynced, renamed and the directory fsynced before the record
// commits. A crash therefore leaves the previous latest checkpoint or the
// new one, never a torn one; an orphaned blob (written, never committed)
// is removed by the next Open (GC). Blobs are shared by content and
// reference-counted; a file is removed after the commit that drops its
// last reference.
//
// Every read checks the state against its digest (inline and blob alike):
// damage is ErrCorrupt, and damaged bytes are never returned.
//
// Latest returns the newest checkpoint across ownership epochs, so an
// owner with a higher epoch resumes where the previous one stopped; a Save
// under an epoch lower than one already stored is fenced with
// WORK_STALE_OWNERSHIP. Save keeps the newest Options.Keep (4) per
// WorkItem; Delete drops a finished WorkItem.
package checkpoint
