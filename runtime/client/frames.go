package client

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// inbound is one frame from the authority, decoded and, for events, with
// the signature checked. Exactly one of the pointers is set, or event.
type inbound struct {
	typ   protocol.FrameType
	hello *protocol.Hello
	ack   *protocol.AckFrame
	ping  *protocol.Ping
	errf  *protocol.ErrorFrame
	bp    *protocol.Backpressure
	grps  *protocol.GroupsFrame
	event queue.Incoming
}

// decodeInbound parses one text message from the authority: strict I-JSON
// once, the frame shape, and for an EVENT the event's canonical bytes (what
// the inbox stores) and, when keys is set, its signature. Frames a server
// never sends (SUBSCRIBE, COMMAND, a client HELLO, a cursor ACK) are a
// PROTOCOL_VIOLATION. It never panics on any input (FuzzDecodeInbound).
func decodeInbound(raw []byte, opts protocol.DecodeOptions, keys protocol.KeyResolver) (inbound, error) {
	parsed, err := protocol.Parse(raw, opts)
	if err != nil {
		return inbound{}, err
	}
	if top, ok := parsed.(map[string]any); ok && top["type"] == string(protocol.FrameEvent) {
		// The hot path: one canonical pass, typed decode from the parsed value.
		f, evRaw, err := protocol.InboundEventFrame(parsed, keys)
		if err != nil {
			return inbound{}, err
		}
		return inbound{typ: protocol.FrameEvent, event: queue.Incoming{Raw: evRaw, Event: f.Event}}, nil
	}
	f, err := protocol.DecodeFrameParsed(raw, parsed)
	if err != nil {
		return inbound{}, err
	}
	switch f := f.(type) {
	case *protocol.Hello:
		if f.Proof != nil || f.AgentID != "" {
			return inbound{}, protocol.Errorf(protocol.CodeProtocolViolation, "the authority sent a client HELLO")
		}
		return inbound{typ: protocol.FrameHello, hello: f}, nil
	case *protocol.AckFrame:
		if f.Receipt == nil {
			return inbound{}, protocol.Errorf(protocol.CodeProtocolViolation, "the authority sent a cursor ACK")
		}
		return inbound{typ: protocol.FrameAck, ack: f}, nil
	case *protocol.Ping:
		return inbound{typ: protocol.FramePing, ping: f}, nil
	case *protocol.ErrorFrame:
		return inbound{typ: protocol.FrameError, errf: f}, nil
	case *protocol.Backpressure:
		return inbound{typ: protocol.FrameBackpressure, bp: f}, nil
	case *protocol.GroupsFrame:
		return inbound{typ: protocol.FrameGroups, grps: f}, nil
	}
	return inbound{}, protocol.Errorf(protocol.CodeProtocolViolation, "the authority does not send %T frames", f)
}

// ids makes frame ids and nonces. Frame ids only need to be unique per
// connection; the random prefix keeps them distinct across reconnects so a
// late answer to an old connection's frame cannot match a new one.
type ids struct {
	prefix string
	n      atomic.Uint64
}

func newIDs() *ids {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &ids{prefix: "f-" + hex.EncodeToString(b[:]) + "-"}
}

func (g *ids) frame() string {
	return g.prefix + strconv.FormatUint(g.n.Add(1), 10)
}

// newNonce returns 256 random bits as 43 base64url characters (the Nonce
// pattern of docs/shapes.md); never reused in practice.
func newNonce() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// newProof signs the HELLO proof {agentId, sessionEpoch, nonce, issuedAt}.
func newProof(key protocol.PrivateKey, agentID string, epoch uint64, nonce string, now time.Time) (*protocol.HelloProof, error) {
	at := protocol.NewTime(now)
	p := protocol.HelloProof{AgentID: agentID, SessionEpoch: epoch, Nonce: nonce, IssuedAt: at,
		Signature: protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: key.KeyID, CreatedAt: at}}
	raw, err := protocol.SignedValue(p, key)
	if err != nil {
		return nil, err
	}
	var out protocol.HelloProof
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func helloFrame(frameID, agentID string, epoch uint64, proof *protocol.HelloProof) ([]byte, error) {
	return json.Marshal(protocol.Hello{Type: protocol.FrameHello, FrameID: frameID,
		ProtocolVersions: []string{protocol.Version}, AgentID: agentID, SessionEpoch: epoch, Proof: proof})
}

func subscribeFrame(frameID, groupID string, after uint64) ([]byte, error) {
	return json.Marshal(protocol.Subscribe{Type: protocol.FrameSubscribe, FrameID: frameID,
		Groups: protocol.List[protocol.GroupPosition]{{GroupID: groupID, AfterSequence: after}}})
}

func ackFrame(frameID string, cursors []protocol.Cursor) ([]byte, error) {
	return json.Marshal(protocol.AckFrame{Type: protocol.FrameAck, FrameID: frameID, Cursors: cursors})
}

func pingFrame(frameID, nonce string, presence *protocol.PresenceRecord, reply bool) ([]byte, error) {
	return json.Marshal(protocol.Ping{Type: protocol.FramePing, FrameID: frameID, Nonce: nonce, Presence: presence, Reply: reply})
}

// commandFrame embeds the signed bytes unchanged: re-encoding them through
// protocol.Command could alter their spelling, and the authority compares
// a retry's bytes with the first attempt's.
func commandFrame(frameID string, signed []byte) []byte {
	b := make([]byte, 0, len(signed)+64)
	b = append(b, `{"type":"COMMAND","frameId":`...)
	b = strconv.AppendQuote(b, frameID)
	b = append(b, `,"command":`...)
	b = append(b, signed...)
	return append(b, '}')
}

// retryAfter reads details.retryAfterMs of a retryable Command error.
func retryAfter(e *protocol.Error) (time.Duration, bool) {
	var ms float64
	switch v := e.Details["retryAfterMs"].(type) {
	case float64:
		ms = v
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return 0, false
		}
		ms = f
	default:
		return 0, false
	}
	if !(ms >= 0) {
		return 0, false
	}
	return pauseFor(ms), true
}

// pauseFor converts a retryAfterMs value, bounded by maxPause.
func pauseFor(ms float64) time.Duration {
	if ms >= float64(maxPause/time.Millisecond) {
		return maxPause
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// maxPause bounds what a BACKPRESSURE or retryAfterMs can ask for, so a
// malformed value cannot stop a Group's Commands for days.
const maxPause = 10 * time.Minute
