package wss

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// frameIDs names the frames one connection sends: a random per-connection
// prefix and a counter, so ids never repeat within or across connections.
type frameIDs struct {
	prefix string
	n      atomic.Uint64
}

func newFrameIDs() *frameIDs {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &frameIDs{prefix: "s" + hex.EncodeToString(b[:]) + "-"}
}

func (f *frameIDs) next() string {
	return f.prefix + strconv.FormatUint(f.n.Add(1), 10)
}

// validID: only ids of the wire form may be echoed in inReplyTo or
// actionId.
func validID(s string) bool { return protocol.ValidID(s) }

// WireError turns any error into one that passes error.schema.json: a known
// code (else INTERNAL_ERROR, whose message reveals nothing), retryable as
// the code says, the pointer copied into details, and inReplyTo/actionId
// only when they are valid ids. The caller's error is not modified.
func WireError(err error, inReplyTo, actionID string) *protocol.Error {
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe == nil || !pe.Code.Known() {
		pe = protocol.Errorf(protocol.CodeInternalError, "internal error")
	}
	e := *pe
	e.Retryable = e.Code.Retryable()
	e.Details = maps.Clone(pe.Details)
	if e.Pointer != "" {
		if e.Details == nil {
			e.Details = map[string]any{}
		}
		if _, ok := e.Details["pointer"]; !ok {
			e.Details["pointer"] = e.Pointer
		}
		e.Pointer = ""
	}
	e.InReplyTo = ""
	if validID(inReplyTo) {
		e.InReplyTo = inReplyTo
	}
	if validID(actionID) {
		e.ActionID = actionID
	} else if !validID(e.ActionID) {
		e.ActionID = ""
	}
	return &e
}

// withDetail returns e with details[key] = value added.
func withDetail(e *protocol.Error, key string, value any) *protocol.Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// encodeError renders an ERROR frame. It cannot fail: details that do not
// encode (never expected) are dropped, and as a last resort a fixed
// INTERNAL_ERROR is sent.
func encodeError(id string, e *protocol.Error) []byte {
	f := protocol.ErrorFrame{Type: protocol.FrameError, FrameID: id, Error: e, InReplyTo: e.InReplyTo}
	if b, err := protocol.Marshal(f); err == nil {
		return b
	}
	c := *e
	c.Details = nil
	f.Error = &c
	if b, err := protocol.Marshal(f); err == nil {
		return b
	}
	f.Error = protocol.Errorf(protocol.CodeInternalError, "internal error")
	b, _ := protocol.Marshal(f)
	return b
}

func encodeHelloReply(id string, epoch uint64, now time.Time, groups []string) ([]byte, error) {
	t := protocol.NewTime(now)
	return protocol.Marshal(protocol.Hello{
		Type: protocol.FrameHello, FrameID: id, ProtocolVersion: ProtocolVersion,
		SessionEpoch: epoch, ServerTime: &t, Groups: groups,
	})
}

func encodeGroups(id string, groups []string) ([]byte, error) {
	return protocol.Marshal(protocol.GroupsFrame{Type: protocol.FrameGroups, FrameID: id, Groups: groups})
}

func encodeAck(id, inReplyTo string, r *protocol.Receipt) ([]byte, error) {
	return protocol.Marshal(protocol.AckFrame{Type: protocol.FrameAck, FrameID: id, InReplyTo: inReplyTo, Receipt: r})
}

func encodePing(id, nonce string, reply bool) ([]byte, error) {
	return protocol.Marshal(protocol.Ping{Type: protocol.FramePing, FrameID: id, Nonce: nonce, Reply: reply})
}

func encodeBackpressure(id, groupID string, retryAfter time.Duration) ([]byte, error) {
	ms := uint64(retryAfter / time.Millisecond)
	return protocol.Marshal(protocol.Backpressure{Type: protocol.FrameBackpressure, FrameID: id, GroupID: groupID, RetryAfterMs: ms})
}

// appendEventFrame writes an EVENT frame around the event's stored JCS bytes
// without re-encoding them. Members come in JCS order, so the frame itself
// is canonical when raw is.
func appendEventFrame(dst []byte, id string, raw []byte) []byte {
	dst = append(dst, `{"event":`...)
	dst = append(dst, raw...)
	dst = append(dst, `,"frameId":"`...)
	dst = append(dst, id...) // ids are plain ASCII, no escaping needed
	return append(dst, `","type":"EVENT"}`...)
}

// newNonce returns 16 random bytes as base64url-safe hex (32 characters),
// matching the nonce pattern.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
