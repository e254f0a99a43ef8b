package authoritylite

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// An unknown non-critical extension is stored and relayed unchanged: the
// events of the command carry it with the same canonical bytes (spec 17.4,
// 21); an unknown critical one refuses the command and changes nothing; an
// extension the authority interprets is not relayed.
func TestExtensionsRelayed(t *testing.T) {
	k := newSvc(t)
	data := json.RawMessage(`{"z":1,"a":"<&>","n":1.50}`)
	want, err := protocol.Canonical(mustParse(t, data))
	if err != nil {
		t.Fatal(err)
	}
	trace := func(critical bool) func(*protocol.Envelope) {
		return func(e *protocol.Envelope) {
			e.Extensions = protocol.Extensions{"urn:example:ext:trace": {Critical: critical, Data: data}}
		}
	}
	r := k.ok(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m1", ConversationID: "c", Text: "hello"}, trace(false))
	var got *protocol.Event
	for _, ev := range checkLog(t, k.s, "grp-a") {
		if ev.EventID == r.Events[0].EventID {
			got = &ev
		}
	}
	if got == nil {
		t.Fatal("the message's event is not in the log")
	}
	e, ok := got.Extensions["urn:example:ext:trace"]
	if !ok || e.Critical || !bytes.Equal(e.Data, want) {
		t.Fatalf("relayed extensions %+v, want the command's data %s", got.Extensions, want)
	}

	before := storedEvents(t, k.s)
	_, err = k.do(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m2", ConversationID: "c", Text: "x"}, trace(true))
	if protocol.CodeOf(err) != protocol.CodeUnknownCriticalExtension {
		t.Fatalf("unknown critical extension: %v", err)
	}
	if storedEvents(t, k.s) != before {
		t.Fatal("a refused command changed the log")
	}

	if got := protocol.Relayed(protocol.Extensions{
		protocol.OfflineExtensionURI: {Critical: true, Data: json.RawMessage(`{}`)},
		"urn:example:ext:known":      {Data: json.RawMessage(`1`)},
		"urn:example:ext:pinned":     {Critical: true, Data: json.RawMessage(`2`)},
		"urn:example:ext:other":      {Data: json.RawMessage(`3`)},
	}, func(uri string) bool { return uri == "urn:example:ext:known" || protocol.KnownExtension(uri) }); len(got) != 2 ||
		string(got["urn:example:ext:other"].Data) != "3" || !got["urn:example:ext:pinned"].Critical {
		t.Fatalf("Relayed kept %v, want every entry not interpreted", got)
	}
}

func mustParse(t *testing.T, raw []byte) any {
	t.Helper()
	v, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
