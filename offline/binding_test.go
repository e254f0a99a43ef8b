package offline

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

func TestBindingOf(t *testing.T) {
	t.Parallel()
	usage := protocol.Usage{Money: 0.5, Tokens: 100, ToolCalls: 1, ComputeSeconds: 2, WallClockSeconds: 3, SideEffects: 0}
	b := binding(time.Minute, usage)
	setData := func(c *protocol.Command, f func(m map[string]any)) {
		var m map[string]any
		json.Unmarshal(c.Extensions[protocol.OfflineExtensionURI].Data, &m)
		f(m)
		data, _ := json.Marshal(m)
		c.Extensions[protocol.OfflineExtensionURI] = protocol.Extension{Critical: true, Data: data}
	}
	setPayload := func(c *protocol.Command, f func(m map[string]any)) {
		var m map[string]any
		json.Unmarshal(c.Payload, &m)
		f(m)
		c.Payload, _ = json.Marshal(m)
	}
	const ext = "/extensions/" + protocol.OfflineExtensionURI
	for _, tc := range []struct {
		name   string
		typ    protocol.CommandType
		mutate func(c *protocol.Command)
		ptr    string // "" means accepted
	}{
		{name: "lease renewal (progress)", typ: protocol.CmdLeaseRenew},
		{name: "checkpoint", typ: protocol.CmdWorkCheckpoint},
		{name: "usage record", typ: protocol.CmdResourceUsageRecord},
		{name: "message", typ: protocol.CmdMessagePost},
		{name: "other extensions are kept", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			c.Extensions["urn:example:x"] = protocol.Extension{Data: json.RawMessage(`{}`)}
		}},
		{name: "no binding", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			delete(c.Extensions, protocol.OfflineExtensionURI)
		}, ptr: "/extensions"},
		{name: "not critical", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			e := c.Extensions[protocol.OfflineExtensionURI]
			e.Critical = false
			c.Extensions[protocol.OfflineExtensionURI] = e
		}, ptr: ext + "/critical"},
		{name: "data not an object", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			c.Extensions[protocol.OfflineExtensionURI] = protocol.Extension{Critical: true, Data: json.RawMessage(`[1]`)}
		}, ptr: ext + "/data"},
		{name: "member missing", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			setData(c, func(m map[string]any) { delete(m, "graceDeadline") })
		}, ptr: ext + "/data/graceDeadline"},
		{name: "usage dimension missing", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			setData(c, func(m map[string]any) { delete(m["usageDelta"].(map[string]any), "sideEffects") })
		}, ptr: ext + "/data/usageDelta/sideEffects"},
		{name: "unknown member", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			setData(c, func(m map[string]any) { m["extra"] = 1 })
		}, ptr: ext + "/data/extra"},
		{name: "time in another form", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			setData(c, func(m map[string]any) { m["bufferedAt"] = "2026-11-30T08:01:00+00:00" })
		}, ptr: ext + "/data/bufferedAt"},
		{name: "not bufferable: submit", typ: protocol.CmdWorkSubmit, ptr: "/type"},
		{name: "not bufferable: start", typ: protocol.CmdWorkStart, ptr: "/type"},
		{name: "actor is not the binding's agent", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			c.Actor.ID = "worker-2"
		}, ptr: ext + "/data/agentId"},
		{name: "human actor", typ: protocol.CmdMessagePost, mutate: func(c *protocol.Command) {
			c.Actor.Kind = protocol.ActorHuman
		}, ptr: ext + "/data/agentId"},
		{name: "other Group", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) { c.GroupID = "grp-b" }, ptr: ext + "/data/groupId"},
		{name: "payload names another WorkItem", typ: protocol.CmdWorkCheckpoint, mutate: func(c *protocol.Command) {
			setPayload(c, func(m map[string]any) { m["workItemId"] = "wi-8" })
		}, ptr: "/payload/workItemId"},
		{name: "payload names another ownership epoch", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			setPayload(c, func(m map[string]any) { m["ownershipEpoch"] = 3 })
		}, ptr: "/payload/ownershipEpoch"},
		{name: "payload names the current, not the historical lease", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			setPayload(c, func(m map[string]any) { m["leaseId"] = "lease-10" })
		}, ptr: "/payload/leaseId"},
		{name: "payload without lease", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			setPayload(c, func(m map[string]any) { delete(m, "leaseId") })
		}, ptr: "/payload/leaseId"},
		{name: "payload not an object", typ: protocol.CmdLeaseRenew, mutate: func(c *protocol.Command) {
			c.Payload = json.RawMessage(`"x"`)
		}, ptr: "/payload"},
		{name: "usage record charging another delta", typ: protocol.CmdResourceUsageRecord, mutate: func(c *protocol.Command) {
			setPayload(c, func(m map[string]any) { m["usageDelta"].(map[string]any)["tokens"] = 101 })
		}, ptr: "/payload/usageDelta"},
	} {
		c := command(t, tc.typ, b, 1)
		c.Extensions = protocol.Extensions{}
		if err := Bind(c, b); err != nil {
			t.Fatal(err)
		}
		if tc.mutate != nil {
			tc.mutate(c)
		}
		got, err := BindingOf(c)
		if tc.ptr == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if !sameBinding(got, b) {
				t.Errorf("%s: decoded %+v, want %+v", tc.name, got, b)
			}
			continue
		}
		pe, ok := err.(*protocol.Error)
		if !ok || pe.Code != protocol.CodeInvalidCommand || pe.Pointer != tc.ptr {
			t.Errorf("%s: %v (pointer %q), want INVALID_COMMAND at %s", tc.name, err, pointerOf(err), tc.ptr)
		}
	}
}

func pointerOf(err error) string {
	if pe, ok := err.(*protocol.Error); ok {
		return pe.Pointer
	}
	return ""
}

// A command signed for the buffer is a valid, verifiable Command at the
// time it was buffered: signature, key, schema (including the binding's
// schema) and the critical extension all pass the inbound pipeline.
func TestSignBufferedPassesInbound(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	in := protocol.Inbound{Keys: protocol.NewKeySet(key.Public())}
	for _, typ := range []protocol.CommandType{protocol.CmdLeaseRenew, protocol.CmdWorkCheckpoint, protocol.CmdResourceUsageRecord, protocol.CmdMessagePost} {
		b := binding(3*time.Minute, protocol.Usage{Tokens: 5, WallClockSeconds: 1.25})
		raw, err := SignBuffered(command(t, typ, b, 2), b, key)
		if err != nil {
			t.Fatal(err)
		}
		ic, err := in.DecodeCommand(raw, b.BufferedAt.Time)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if !ic.Command.IssuedAt.Equal(b.BufferedAt.Time) {
			t.Errorf("%s: issuedAt %s, want bufferedAt %s", typ, ic.Command.IssuedAt, b.BufferedAt)
		}
		if got, err := BindingOf(ic.Command); err != nil || !sameBinding(got, b) {
			t.Errorf("%s: binding after the pipeline: %+v %v", typ, got, err)
		}
	}
}
