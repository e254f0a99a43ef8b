package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// SignedEvent is one event of a Group's log; coordinator's type, so
// that Authority satisfies coordinator.Authority.
type SignedEvent = coordinator.SignedEvent

// pageSize is what one events request asks for (the routes' maximum).
const pageSize = 1024

// waitMs is one long-poll's length; Wait repeats it until ctx ends.
const waitMs = 25000

// Events returns up to max (0: all there are) events of groupID after
// sequence after, in order, each verified with Config.AuthorityKeys. A
// read that continues the last one of the Group reads its newest events
// again and compares them (diverge.go): a refusal with details.reason
// ahead_of_log or diverged says the authority's log is not the history
// given out before.
func (a *Authority) Events(ctx context.Context, groupID string, after uint64, max int) ([]SignedEvent, error) {
	from, overlap, err := a.tails.plan(groupID, after)
	if err != nil {
		return nil, err
	}
	want := max
	if max > 0 {
		want = max + int(after-from)
	}
	evs, err := a.read(ctx, groupID, from, want)
	if protocol.CodeOf(err) == protocol.CodeCursorTooOld && from < after {
		// The overlap is no longer online (compacted): read without it.
		from, overlap, want = after, nil, max
		evs, err = a.read(ctx, groupID, from, want)
	}
	if err != nil {
		return nil, a.tails.refused(groupID, err)
	}
	return a.tails.settle(groupID, from, after, overlap, evs, want == 0 || len(evs) < want)
}

// read returns up to max (0: all there are) events after after.
func (a *Authority) read(ctx context.Context, groupID string, after uint64, max int) ([]SignedEvent, error) {
	var out []SignedEvent
	for {
		n := pageSize
		if max > 0 && max-len(out) < n {
			n = max - len(out)
		}
		page, err := a.page(ctx, groupID, after, n, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < n || (max > 0 && len(out) >= max) {
			return out, nil
		}
		after = page[len(page)-1].Sequence
	}
}

// Wait returns when groupID's log holds an event after sequence after, or
// when ctx ends (its error).
func (a *Authority) Wait(ctx context.Context, groupID string, after uint64) error {
	for {
		if _, _, err := a.tails.plan(groupID, after); err != nil {
			return err
		}
		page, err := a.page(ctx, groupID, after, 1, waitMs)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return a.tails.refused(groupID, err)
		}
		if len(page) > 0 {
			return nil
		}
	}
}

// page is one GET /mwp/groups/G/events.
func (a *Authority) page(ctx context.Context, groupID string, after uint64, max int, wait int) ([]SignedEvent, error) {
	if a.cfg.AuthorityKeys == nil {
		return nil, errors.New("remote: reading events needs Config.AuthorityKeys to verify them")
	}
	path := "/groups/" + url.PathEscape(groupID) + "/events?after=" + itoa(after) + "&max=" + itoa(uint64(max))
	if wait > 0 {
		path += "&waitMs=" + itoa(uint64(wait))
	}
	var body []byte
	if err := a.do(ctx, http.MethodGet, path, "", nil, true, func(b []byte) error { body = b; return nil }); err != nil {
		return nil, err
	}
	return decodePage(body, groupID, after, a.cfg.AuthorityKeys)
}

// decodePage checks an events answer: {"events": [...]}, each event
// verified, of groupID, in increasing sequence after after.
func decodePage(b []byte, groupID string, after uint64, keys protocol.KeyResolver) ([]SignedEvent, error) {
	var body struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("remote: events answer: %w", err)
	}
	out := make([]SignedEvent, 0, len(body.Events))
	next := after
	for _, raw := range body.Events {
		ev, canon, err := verifyEvent(raw, keys)
		if err != nil {
			return nil, err
		}
		seq := ev.Seq()
		if ev.GroupID != groupID || seq <= next {
			return nil, fmt.Errorf("remote: group %s answered event %s (group %s, sequence %d) after sequence %d", groupID, ev.EventID, ev.GroupID, seq, next)
		}
		next = seq
		out = append(out, SignedEvent{Sequence: seq, Raw: canon})
	}
	return out, nil
}

// verifyEvent decodes one event of an answer and checks its signature.
func verifyEvent(raw []byte, keys protocol.KeyResolver) (*protocol.Event, []byte, error) {
	parsed, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		return nil, nil, err
	}
	doc, _ := parsed.(map[string]any)
	return protocol.InboundEvent(doc, keys)
}

// Snapshot downloads the Group Snapshot a CURSOR_TOO_OLD named (GET
// /mwp/groups/G/snapshots/DIGEST) and checks it against ref and
// Config.AuthorityKeys (group.CheckSnapshot).
func (a *Authority) Snapshot(ctx context.Context, ref protocol.SnapshotRef) (*protocol.GroupSnapshot, error) {
	if a.cfg.AuthorityKeys == nil {
		return nil, errors.New("remote: reading a snapshot needs Config.AuthorityKeys to verify it")
	}
	doc, err := a.SnapshotDocument(ctx, ref)
	if err != nil {
		return nil, err
	}
	keys := a.cfg.AuthorityKeys
	snap, _, err := group.CheckSnapshot(ref, doc, func(m map[string]any) error { return protocol.Verify(m, keys) })
	return snap, err
}

// SnapshotDocument downloads the Group Snapshot a CURSOR_TOO_OLD named as
// the authority stored it, unchecked: a worker's store checks it when it
// restores it (queue.Store.RestoreSnapshot).
func (a *Authority) SnapshotDocument(ctx context.Context, ref protocol.SnapshotRef) ([]byte, error) {
	var doc []byte
	path := "/groups/" + url.PathEscape(ref.GroupID) + "/snapshots/" + ref.Digest
	if err := a.do(ctx, http.MethodGet, path, "", nil, true, func(b []byte) error { doc = b; return nil }); err != nil {
		return nil, err
	}
	return doc, nil
}
