package wss

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/missionweave/mwp-worker/protocol"
)

// session is the protocol state machine of one connection. handle turns one
// inbound WebSocket message into the frames to send and the work the I/O
// loop must start (streams, command submissions). It calls the Backend only
// for the quick, synchronous checks (Hello, Authorize, Acked); it never
// touches the network, so it is table-tested and fuzzed directly.
type session struct {
	b        Backend
	ids      *frameIDs
	maxFrame int
	log      *slog.Logger

	open  bool   // a HELLO succeeded
	peer  string // the authenticated agent
	epoch uint64 // its session epoch
	// ended is closed once a newer session of the agent exists (from
	// Backend.SessionReplaced at HELLO): from then on every frame is
	// refused with AUTH_STALE_SESSION while the connection closes.
	ended <-chan struct{}
	// groups are the agent's Groups told in the HELLO answer, and
	// groupsChanged the channel to watch for the next change (nil when the
	// Backend does not list Groups).
	groups        []string
	groupsChanged <-chan struct{}

	limits sessionLimits
}

// sessionLimits are the frame rate limits of one connection; a zero value
// (table tests) limits nothing.
type sessionLimits struct {
	// helloReady reports whether the remote address may try a HELLO now
	// (its bucket has a token) and helloFailed charges it for one that
	// did not open the session: a HELLO that succeeds costs its address
	// nothing, so a fleet behind one address reconnects at once, while
	// failures (a guessed key, a replay, a bad frame) stay bounded.
	helloReady  func(now time.Time) (time.Duration, bool)
	helloFailed func(now time.Time)
	pings       *rate.Limiter // client PINGs on this connection
	every       time.Duration // the PING refill interval
}

// inbound is one received WebSocket message.
type inbound struct {
	binary   bool
	oversize bool // more than maxFrame bytes; data holds only a prefix
	data     []byte
}

// output is what one message asks of the connection, applied in field
// order: send the frames, start the streams, queue the command, then close
// if asked.
type output struct {
	send      [][]byte
	subscribe []subscription
	submit    *submission
	close     bool // close the connection (1009) once send is flushed
	opened    bool // this message completed HELLO
}

// subscription asks for one Group's events after after.
type subscription struct {
	frameID string // the SUBSCRIBE that asked, for inReplyTo of later errors
	groupID string
	after   uint64
	filter  *protocol.SubscribeFilter
}

// submission is one COMMAND to run through Backend.Submit.
type submission struct {
	peer     string // the authenticated agent
	frameID  string
	actionID string // "" when the command has no valid actionId
	groupID  string // command lane; "" for Organization-scoped commands
	raw      []byte // JCS bytes of the command member
}

func newSession(b Backend, ids *frameIDs, maxFrame int, log *slog.Logger) *session {
	return &session{b: b, ids: ids, maxFrame: maxFrame, log: log}
}

func (s *session) fail(out *output, err error, inReplyTo, actionID string) {
	out.send = append(out.send, encodeError(s.ids.next(), WireError(err, inReplyTo, actionID)))
}

func violation(format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.CodeProtocolViolation, format, args...)
}

func (s *session) handle(ctx context.Context, m inbound) (out output) {
	if m.oversize {
		s.fail(&out, violation("frame is larger than %d bytes", s.maxFrame), "", "")
		out.close = true
		return out
	}
	if m.binary {
		s.fail(&out, violation("binary messages carry no protocol objects (spec 17.1); send one JSON text frame"), "", "")
		return out
	}
	parsed, err := protocol.Parse(m.data, protocol.DecodeOptions{MaxBytes: s.maxFrame})
	if err != nil {
		s.fail(&out, err, "", "")
		return out
	}
	frameID := readFrameID(parsed)
	t, err := protocol.DecodeFrameType(parsed)
	if err != nil {
		s.fail(&out, err, frameID, "")
		return out
	}
	if !s.open && t != protocol.FrameHello {
		s.fail(&out, protocol.Errorf(protocol.CodeAuthRequired, "send HELLO before %s", t), frameID, "")
		return out
	}
	if s.replaced() {
		s.fail(&out, s.staleSession(), frameID, "")
		return out
	}
	switch t {
	case protocol.FrameHello:
		s.hello(ctx, &out, m.data, parsed, frameID)
	case protocol.FrameSubscribe:
		s.subscribe(&out, m.data, parsed, frameID)
	case protocol.FrameCommand:
		s.command(&out, parsed, frameID)
	case protocol.FrameAck:
		s.ack(&out, m.data, parsed, frameID)
	case protocol.FramePing:
		s.ping(&out, m.data, parsed, frameID)
	case protocol.FrameError:
		// Never answer an ERROR with an ERROR unless it is malformed:
		// two peers could bounce errors forever.
		f, err := decodeFrame(m.data, parsed)
		if err != nil {
			s.fail(&out, err, frameID, "")
			return out
		}
		e := f.(*protocol.ErrorFrame).Error
		s.log.Debug("wss: client sent ERROR", "peer", s.peer, "code", e.Code, "message", e.Message)
	default: // EVENT, BACKPRESSURE, GROUPS
		s.fail(&out, violation("%s frames are sent by the server only", t).At("/type"), frameID, "")
	}
	return out
}

// readFrameID returns the frameId when it can be echoed as inReplyTo.
func readFrameID(parsed any) string {
	obj, _ := parsed.(map[string]any)
	id, _ := obj["frameId"].(string)
	if !validID(id) {
		return ""
	}
	return id
}

// decodeFrame is the strict typed decode plus the frame schema; every
// failure is a PROTOCOL_VIOLATION (a frame is transport, not an object of
// its own), keeping the schema's problem list in details.
func decodeFrame(raw []byte, parsed any) (any, error) {
	f, err := protocol.DecodeFrameParsed(raw, parsed)
	if err != nil {
		return nil, err
	}
	if err := protocol.Validate("websocket-frame", parsed); err != nil {
		e := WireError(err, "", "")
		e.Code = protocol.CodeProtocolViolation
		e.Retryable = false
		return nil, e
	}
	return f, nil
}

// hello checks, in this order: frame shape, protocol version, that the
// proof binds this frame's agent and epoch, then the Backend (signature,
// key, freshness, nonce, session epoch).
func (s *session) hello(ctx context.Context, out *output, raw []byte, parsed any, frameID string) {
	if s.open {
		s.fail(out, violation("the session is already open; HELLO is sent once per connection"), frameID, "")
		return
	}
	// Checked before anything else; charged unless the HELLO opens the
	// session (a replayed one is refused by its nonce, and charged).
	if s.limits.helloReady != nil {
		if wait, ok := s.limits.helloReady(s.b.Now()); !ok {
			s.fail(out, rateLimited(wait, "too many failed HELLO attempts from this address"), frameID, "")
			return
		}
		defer func() {
			if !s.open {
				s.limits.helloFailed(s.b.Now())
			}
		}()
	}
	f, err := decodeFrame(raw, parsed)
	if err != nil {
		s.fail(out, err, frameID, "")
		return
	}
	h := f.(*protocol.Hello)
	if h.Proof == nil {
		s.fail(out, violation("a client HELLO carries protocolVersions, agentId, sessionEpoch and proof"), frameID, "")
		return
	}
	if !slices.Contains(h.ProtocolVersions, ProtocolVersion) {
		e := protocol.Errorf(protocol.CodeUnsupportedVersion, "no offered protocol version is supported")
		s.fail(out, withDetail(e, "supported", []any{ProtocolVersion}), frameID, "")
		return
	}
	// Checked before the Backend so a mismatched proof burns no nonce.
	if h.Proof.AgentID != h.AgentID || h.Proof.SessionEpoch != h.SessionEpoch {
		s.fail(out, protocol.Errorf(protocol.CodeAuthInvalidSignature,
			"the proof does not bind this HELLO's agentId and sessionEpoch"), frameID, "")
		return
	}
	epoch, err := s.b.Hello(ctx, h)
	if err != nil {
		s.backendError(out, "hello", err, frameID, "")
		return
	}
	var groups []string
	var changed <-chan struct{}
	if mg, ok := s.b.(MemberGroups); ok {
		changed = mg.MembershipChanged() // before the list: no change is missed
		groups = mg.MemberGroups(h.AgentID)
	}
	reply, err := encodeHelloReply(s.ids.next(), epoch, s.b.Now(), groups)
	if err != nil {
		s.backendError(out, "hello reply", err, frameID, "")
		return
	}
	s.groups, s.groupsChanged = groups, changed
	s.open, s.peer, s.epoch = true, h.AgentID, epoch
	s.ended = s.b.SessionReplaced(h.AgentID, epoch)
	out.opened = true
	out.send = append(out.send, reply)
}

// backendError sends err; errors that are not protocol errors are logged
// here and reach the client only as a bare INTERNAL_ERROR.
func (s *session) backendError(out *output, op string, err error, inReplyTo, actionID string) {
	if protocol.CodeOf(err) == protocol.CodeInternalError {
		s.log.Error("wss: backend failed", "op", op, "peer", s.peer, "err", err)
	}
	s.fail(out, err, inReplyTo, actionID)
}

// hidden are the codes that would tell an unauthorized reader something
// about a Group; all of them become the same GROUP_NOT_FOUND (spec 17.2).
var hidden = []protocol.Code{
	protocol.CodeGroupNotFound, protocol.CodeAuthForbidden,
	protocol.CodeMembershipRequired, protocol.CodeMembershipStale,
}

func groupNotFound(groupID string) *protocol.Error {
	return withDetail(protocol.Errorf(protocol.CodeGroupNotFound, "group not found"), "groupId", groupID)
}

func (s *session) subscribe(out *output, raw []byte, parsed any, frameID string) {
	f, err := decodeFrame(raw, parsed)
	if err != nil {
		s.fail(out, err, frameID, "")
		return
	}
	for _, g := range f.(*protocol.Subscribe).Groups {
		if err := s.b.Authorize(s.peer, g.GroupID); err != nil {
			code := protocol.CodeOf(err)
			var e *protocol.Error
			switch {
			case slices.Contains(hidden, code):
				e = groupNotFound(g.GroupID)
			default:
				if code == protocol.CodeInternalError {
					s.log.Error("wss: backend failed", "op", "authorize", "peer", s.peer, "err", err)
				}
				e = withDetail(WireError(err, "", ""), "groupId", g.GroupID)
			}
			s.fail(out, e, frameID, "")
			continue
		}
		if e := s.aheadOfLog(g.GroupID, g.AfterSequence); e != nil {
			s.fail(out, e, frameID, "")
			continue
		}
		out.subscribe = append(out.subscribe, subscription{frameID: frameID, groupID: g.GroupID, after: g.AfterSequence, filter: g.Filter})
	}
}

// command checks only the frame around the command; the command itself is
// the Backend's to judge (schema, signature, epochs), so it gets the JCS
// bytes of exactly the value received.
func (s *session) command(out *output, parsed any, frameID string) {
	obj := parsed.(map[string]any) // DecodeFrameType accepted it
	for name := range obj {
		switch name {
		case "type", "frameId", "command":
		default:
			s.fail(out, violation("COMMAND has no member %q", name).At("/"+name), frameID, "")
			return
		}
	}
	if frameID == "" {
		s.fail(out, violation("COMMAND needs a frameId matching the id pattern").At("/frameId"), "", "")
		return
	}
	cmd, ok := obj["command"].(map[string]any)
	if !ok {
		s.fail(out, violation("COMMAND needs a command object").At("/command"), frameID, "")
		return
	}
	actionID, _ := cmd["actionId"].(string)
	if !validID(actionID) {
		actionID = ""
	}
	groupID, _ := cmd["groupId"].(string)
	if err := s.checkCommandEpoch(cmd); err != nil {
		s.fail(out, err, frameID, actionID)
		return
	}
	raw, err := protocol.Canonical(cmd)
	if err != nil {
		s.fail(out, err, frameID, actionID)
		return
	}
	out.submit = &submission{peer: s.peer, frameID: frameID, actionID: actionID, groupID: groupID, raw: raw}
}

// replaced reports whether the open session has been replaced. It is safe
// to call from any goroutine once HELLO succeeded.
func (s *session) replaced() bool {
	if s.ended == nil {
		return false
	}
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// staleSession is the refusal of a connection whose session was replaced.
func (s *session) staleSession() *protocol.Error {
	cur := s.b.SessionEpoch(s.peer)
	e := protocol.Errorf(protocol.CodeAuthStaleSession, "session %d of %s was replaced by session %d; HELLO again at the current epoch", s.epoch, s.peer, cur)
	return withDetail(withDetail(e, "sessionEpoch", cur), "helloSessionEpoch", s.epoch)
}

// checkCommandEpoch ties the peer's own commands to the session its HELLO
// opened: a sessionEpoch other than the connection's is AUTH_STALE_SESSION
// even when it names the agent's current session, so a connection of a
// replaced session cannot act for its successor. Commands of other actors
// (relayed humans and services, which carry no session, or another agent,
// refused by the Backend) and epochs that are not numbers (the schema's to
// refuse) are left to the Backend.
func (s *session) checkCommandEpoch(cmd map[string]any) error {
	actor, _ := cmd["actor"].(map[string]any)
	if actor["kind"] != string(protocol.ActorAgent) || actor["id"] != s.peer {
		return nil
	}
	num, ok := cmd["sessionEpoch"].(json.Number)
	if !ok {
		return nil
	}
	// As a float64, as JCS renders it: 3.0 is the epoch 3.
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f == float64(s.epoch) {
		return nil
	}
	cur := s.b.SessionEpoch(s.peer)
	e := protocol.Errorf(protocol.CodeAuthStaleSession, "this connection said HELLO at session %d; a command of session %s cannot use it", s.epoch, num).At("/sessionEpoch")
	return withDetail(withDetail(e, "sessionEpoch", cur), "helloSessionEpoch", s.epoch)
}

func (s *session) ack(out *output, raw []byte, parsed any, frameID string) {
	f, err := decodeFrame(raw, parsed)
	if err != nil {
		s.fail(out, err, frameID, "")
		return
	}
	a := f.(*protocol.AckFrame)
	if a.Receipt != nil {
		s.fail(out, violation("command receipts are sent by the server; a client ACK carries cursors"), frameID, "")
		return
	}
	for _, c := range a.Cursors {
		// Checked only for a Group the peer may read: the refusal names
		// the log's last sequence.
		if e := s.aheadOfLog(c.GroupID, c.Sequence); e != nil && s.b.Authorize(s.peer, c.GroupID) == nil {
			s.fail(out, e, frameID, "")
			continue
		}
		s.b.Acked(s.peer, c.GroupID, c.Sequence)
	}
}

func (s *session) ping(out *output, raw []byte, parsed any, frameID string) {
	f, err := decodeFrame(raw, parsed)
	if err != nil {
		s.fail(out, err, frameID, "")
		return
	}
	p := f.(*protocol.Ping)
	if p.Reply {
		return // the answer to our PING; receiving it already counts as liveness
	}
	if s.limits.pings != nil {
		if wait, ok := take(s.limits.pings, s.b.Now(), s.limits.every); !ok {
			s.fail(out, rateLimited(wait, "too many PINGs on this connection"), frameID, "")
			return
		}
	}
	reply, err := encodePing(s.ids.next(), p.Nonce, true)
	if err != nil {
		s.fail(out, err, frameID, "")
		return
	}
	out.send = append(out.send, reply)
}
