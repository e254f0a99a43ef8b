package protocol

import (
	"encoding/json"
	"testing"
)

// cmdDoc builds a parsed command envelope with the given extra members.
func cmdDoc(t *testing.T, typ, kind string, extra string) any {
	t.Helper()
	s := `{"actionId":"act-1","protocolVersion":"0.1","actor":{"kind":"` + kind + `","id":"x"},"type":"` + typ + `",` +
		`"correlationId":"c","issuedAt":"2026-11-30T08:00:00Z","payload":{},"signature":{}` + extra + `}`
	v, err := Parse([]byte(s), DecodeOptions{})
	if err != nil {
		t.Fatalf("bad test document %s: %v", s, err)
	}
	return v
}

func TestCheckCommandEpochs(t *testing.T) {
	const (
		grp   = `,"groupId":"g"`
		sess  = `,"sessionEpoch":1`
		mem   = `,"membershipEpoch":1`
		coord = `,"coordinatorEpoch":2`
	)
	tests := []struct {
		name, typ, kind, extra string
		pointer                string // "" means valid
	}{
		{"agent work command", "work.accept_offer", "agent", grp + sess + mem, ""},
		{"agent missing session", "work.accept_offer", "agent", grp + mem, "/sessionEpoch"},
		{"agent missing membership", "work.start", "agent", grp + sess, "/membershipEpoch"},
		{"agent missing group", "work.start", "agent", sess + mem, "/groupId"},
		{"epoch zero counts as present", "work.start", "agent", grp + `,"sessionEpoch":0,"membershipEpoch":0`, ""},
		{"accept_result needs coordinator epoch", "work.accept_result", "agent", grp + sess + mem, "/coordinatorEpoch"},
		{"accept_result with coordinator epoch", "work.accept_result", "agent", grp + sess + mem + coord, ""},
		{"renew_coordinator", "mission.renew_coordinator", "agent", grp + sess + mem, "/coordinatorEpoch"},
		{"submit_for_approval", "mission.submit_for_approval", "agent", grp + sess + mem, "/coordinatorEpoch"},
		{"create_child", "mission.create_child", "agent", grp + sess + mem, "/coordinatorEpoch"},
		{"grant_delegation", "membership.grant_delegation", "agent", grp + sess + mem, "/coordinatorEpoch"},
		{"agent terminate needs coordinator epoch", "mission.terminate", "agent", grp + sess + mem, "/coordinatorEpoch"},
		{"agent terminate ok", "mission.terminate", "agent", grp + sess + mem + coord, ""},
		{"service terminate ok", "mission.terminate", "service", grp, ""},
		{"service terminate with coordinator epoch", "mission.terminate", "service", grp + coord, "/coordinatorEpoch"},
		{"service inventing session epoch", "mission.terminate", "service", grp + sess, "/sessionEpoch"},
		{"service inventing membership epoch", "work.cancel", "service", grp + mem, "/membershipEpoch"},
		{"human approve", "mission.approve", "human", grp + mem, ""},
		{"human with session epoch", "mission.approve", "human", grp + mem + sess, "/sessionEpoch"},
		{"human without membership", "mission.approve", "human", grp, "/membershipEpoch"},
		{"human cannot hold coordinator lease", "work.accept_result", "human", grp + mem, "/actor/kind"},
		{"mission.create by human", "mission.create", "human", grp, ""},
		{"mission.create with membership", "mission.create", "human", grp + mem, "/membershipEpoch"},
		{"mission.create without group", "mission.create", "human", "", "/groupId"},
		{"mission.create by agent", "mission.create", "agent", grp, "/actor/kind"},
		{"follow_up by human", "mission.create_follow_up", "human", grp, ""},
		{"agent card register", "ext.missionweaveprotocol.registry.agent_card_register", "agent", "", ""},
		{"agent card register with group", "ext.missionweaveprotocol.registry.agent_card_register", "agent", grp, "/groupId"},
		{"session open with epoch", "ext.missionweaveprotocol.identity.session_open", "agent", sess, "/sessionEpoch"},
		{"session open", "ext.missionweaveprotocol.identity.session_open", "agent", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckCommandEpochs(cmdDoc(t, tt.typ, tt.kind, tt.extra))
			if tt.pointer == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			pe, ok := err.(*Error)
			if !ok || pe.Code != CodeInvalidCommand || pe.Pointer != tt.pointer {
				t.Fatalf("err = %v, want INVALID_COMMAND at %s", err, tt.pointer)
			}
		})
	}
}

func TestCheckExtensions(t *testing.T) {
	tests := []struct {
		name, ext string
		wantCode  Code
	}{
		{"none", ``, ""},
		{"unknown non-critical kept", `,"extensions":{"urn:example:x":{"critical":false,"data":{"a":[1,2]}}}`, ""},
		{"unknown critical", `,"extensions":{"urn:example:x":{"critical":true,"data":{}}}`, CodeUnknownCriticalExtension},
		{"known critical", `,"extensions":{"` + OfflineExtensionURI + `":{"critical":true,"data":{}}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := cmdDoc(t, "work.checkpoint", "agent", tt.ext)
			before, _ := Canonical(doc)
			err := CheckExtensions(doc, KnownExtension)
			if tt.wantCode == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tt.wantCode != "" && CodeOf(err) != tt.wantCode {
				t.Fatalf("err = %v, want %s", err, tt.wantCode)
			}
			after, _ := Canonical(doc)
			if string(before) != string(after) {
				t.Fatal("CheckExtensions changed the document")
			}
		})
	}
	// A non-critical unknown extension survives a typed round trip with
	// the same canonical bytes, so it can be relayed unchanged.
	raw := `{"urn:example:x":{"critical":false,"data":{"z":1,"a":"<b>"}}}`
	var exts map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &exts); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(exts)
	c1, _ := CanonicalBytes([]byte(raw), DecodeOptions{})
	c2, _ := CanonicalBytes(out, DecodeOptions{})
	if string(c1) != string(c2) {
		t.Fatalf("relay changed canonical bytes: %s vs %s", c1, c2)
	}
}
