package client

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/coder/websocket"

	"github.com/missionweave/mwp-worker/protocol"
)

func (sc *serverConn) writeLoop(ctx context.Context) {
	events := 0
	for {
		sc.mu.Lock()
		var frame []byte
		isEvent := false
		if len(sc.ctrl) > 0 {
			frame, sc.ctrl = sc.ctrl[0], sc.ctrl[1:]
		} else {
			var ready []string
			for g, q := range sc.queues {
				if len(q) > 0 {
					ready = append(ready, g)
				}
			}
			if len(ready) > 0 {
				slices.Sort(ready)
				g := ready[sc.rnd.IntN(len(ready))]
				frame, sc.queues[g] = sc.queues[g][0], sc.queues[g][1:]
				isEvent = true
			}
		}
		sc.mu.Unlock()
		if frame == nil {
			select {
			case <-sc.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		if isEvent {
			sc.fs.mu.Lock()
			drop := sc.num == 1 && sc.fs.dropAfter > 0 && events >= sc.fs.dropAfter
			sc.fs.mu.Unlock()
			if drop {
				sc.ws.CloseNow()
				return
			}
			sc.noteSent(frame)
			events++
		}
		if sc.ws.Write(ctx, websocket.MessageText, frame) != nil {
			return
		}
	}
}

// noteSent records which sequence an EVENT frame carried.
func (sc *serverConn) noteSent(frame []byte) {
	var f struct {
		Event struct {
			GroupID  string `json:"groupId"`
			Sequence uint64 `json:"sequence"`
		} `json:"event"`
	}
	if json.Unmarshal(frame, &f) != nil {
		return
	}
	fs := sc.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.sent[f.Event.GroupID] == nil {
		fs.sent[f.Event.GroupID] = map[uint64]bool{}
	}
	fs.sent[f.Event.GroupID][f.Event.Sequence] = true
}

func eventFrame(id string, raw []byte) []byte {
	return []byte(`{"type":"EVENT","frameId":` + strconv.Quote(id) + `,"event":` + string(raw) + `}`)
}

func (sc *serverConn) onFrame(data []byte) {
	fs := sc.fs
	f, err := protocol.DecodeFrame(data)
	if err != nil {
		fs.t.Errorf("client sent a bad frame %s: %v", data, err)
		return
	}
	prev := sc.lastSub
	sc.lastSub = ""
	switch f := f.(type) {
	case *protocol.Subscribe:
		for _, gp := range f.Groups {
			sc.subscribe(f.FrameID, gp)
		}
		if len(f.Groups) == 1 {
			sc.lastSub = f.Groups[0].GroupID
		}
	case *protocol.CommandFrame:
		parsed, _ := protocol.Parse(data, protocol.DecodeOptions{})
		raw, err := protocol.Canonical(parsed.(map[string]any)["command"])
		if err != nil {
			fs.t.Errorf("command: %v", err)
			return
		}
		fs.mu.Lock()
		fs.cmds = append(fs.cmds, raw)
		fs.cmdConn = append(fs.cmdConn, sc.num)
		hook := fs.onCommand
		fs.notifyLocked()
		fs.mu.Unlock()
		if hook == nil || !hook(sc, f.FrameID, raw) {
			sc.control(protocol.AckFrame{Type: protocol.FrameAck, FrameID: "s-" + f.FrameID, InReplyTo: f.FrameID,
				Receipt: &protocol.Receipt{ActionID: f.Command.ActionID}})
		}
	case *protocol.Ping:
		fs.mu.Lock()
		if !f.Reply {
			fs.pings++
			fs.presence = f.Presence
		} else {
			fs.echoes = append(fs.echoes, f.Nonce)
		}
		echo := fs.echoPings
		fs.notifyLocked()
		fs.mu.Unlock()
		if !f.Reply && echo {
			sc.control(protocol.Ping{Type: protocol.FramePing, FrameID: "s-" + f.FrameID, Nonce: f.Nonce, Reply: true})
		}
	case *protocol.AckFrame:
		claim := prev != "" && len(f.Cursors) == 1 && f.Cursors[0].GroupID == prev
		if sc.refuseAhead(f.FrameID, f.Cursors) {
			return
		}
		fs.mu.Lock()
		check := fs.ackCheck
		for _, c := range f.Cursors {
			if ref, ok := fs.tooOld[c.GroupID]; ok && c.Sequence <= ref.Sequence {
				continue // restored from the snapshot, not sent
			}
			if claim {
				continue // the durable cursor said again after a SUBSCRIBE below it (diverge.go)
			}
			if top := fs.contiguousSentLocked(c.GroupID); c.Sequence > top {
				fs.t.Errorf("ACK %s:%d is past the contiguous sequences ever sent (%d)", c.GroupID, c.Sequence, top)
			}
		}
		fs.acks = append(fs.acks, f.Cursors...)
		fs.notifyLocked()
		fs.mu.Unlock()
		if check != nil {
			for _, c := range f.Cursors {
				check(c)
			}
		}
	default:
		fs.t.Errorf("client sent an unexpected frame %s", data)
	}
}

func (sc *serverConn) subscribe(frameID string, gp protocol.GroupPosition) {
	fs := sc.fs
	// Counted before any answer goes out: a test reading fs.subs once the
	// client acted on the answer must see this SUBSCRIBE.
	fs.mu.Lock()
	fs.subs = append(fs.subs, gp)
	fs.mu.Unlock()
	if sc.refuseAhead(frameID, []protocol.Cursor{{GroupID: gp.GroupID, Sequence: gp.AfterSequence}}) {
		return
	}
	fs.mu.Lock()
	unknown := fs.unknown[gp.GroupID]
	ref, hasRef := fs.tooOld[gp.GroupID]
	log := slices.Clone(fs.logs[gp.GroupID])
	mangle := fs.mangle
	if !unknown && !(hasRef && gp.AfterSequence < ref.Sequence) {
		// Under fs.mu, so appendLive sees the subscription or the log
		// copy holds its events.
		sc.mu.Lock()
		sc.subbed[gp.GroupID] = true
		sc.mu.Unlock()
		fs.served = append(fs.served, gp)
	}
	fs.notifyLocked()
	fs.mu.Unlock()
	switch {
	case unknown:
		sc.control(protocol.ErrorFrame{Type: protocol.FrameError, FrameID: "s-" + frameID, InReplyTo: frameID,
			Error: protocol.Errorf(protocol.CodeGroupNotFound, "no such group")})
		return
	case hasRef && gp.AfterSequence < ref.Sequence:
		e := protocol.Errorf(protocol.CodeCursorTooOld, "cursor %d is below the online log", gp.AfterSequence)
		e.Details = map[string]any{"snapshot": ref}
		if fs.tellFirst {
			e.Details["firstSequence"] = ref.Sequence + 1
		}
		sc.control(protocol.ErrorFrame{Type: protocol.FrameError, FrameID: "s-" + frameID, InReplyTo: frameID, Error: e})
		return
	}
	var frames [][]byte
	for i := gp.AfterSequence; i < uint64(len(log)); i++ {
		frames = append(frames, eventFrame("s-ev-"+gp.GroupID+"-"+strconv.FormatUint(i+1, 10), log[i]))
	}
	if mangle != nil {
		frames = mangle(sc.mrnd, frames)
	}
	sc.enqueue(gp.GroupID, frames)
}

// shuffleDup sends every frame 2–5 times, shuffled within a window, and
// withholds each frame with probability drop (the gap must be replayed).
func shuffleDup(window int, drop float64) func(r *rand.Rand, frames [][]byte) [][]byte {
	return func(r *rand.Rand, frames [][]byte) [][]byte {
		var out [][]byte
		for _, f := range frames {
			if r.Float64() < drop {
				continue
			}
			for range 2 + r.IntN(4) {
				out = append(out, f)
			}
		}
		for i := range out {
			j := min(len(out)-1, i+r.IntN(window))
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
}
