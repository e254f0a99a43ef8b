package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// typesRoundTrip marshals v, decodes the bytes strictly into a new value of
// v's type, and checks that the value and the re-marshalled bytes are equal.
func typesRoundTrip(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	back := reflect.New(reflect.TypeOf(v))
	if err := DecodeExact(b, back.Interface(), CodeSchemaValidationFailed); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if !reflect.DeepEqual(back.Elem().Interface(), v) {
		t.Fatalf("round trip changed the value\nwant %#v\ngot  %#v", v, back.Elem().Interface())
	}
	again, err := json.Marshal(back.Elem().Interface())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("re-marshal differs\nfirst  %s\nsecond %s", b, again)
	}
	return b
}

// typesAssertFilled fails when a member of v is zero, so that examples set
// every member and a round trip covers them all. A non-nil pointer counts
// as set even when it points at zero (that is what "present" means), and
// Budgets members are optional one by one: the Budgets example fills them.
func typesAssertFilled(t *testing.T, v reflect.Value, path string, zeroOK []string) {
	t.Helper()
	if slices.Contains(zeroOK, path) {
		return
	}
	if v.IsZero() {
		t.Errorf("example leaves %s zero", path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.Elem().Kind() == reflect.Struct {
			typesAssertFilled(t, v.Elem(), path, zeroOK)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[Time]() || (v.Type() == reflect.TypeFor[Budgets]() && path != "") {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if f.Tag.Get("json") == "-" {
				continue
			}
			p := f.Name
			if path != "" {
				p = path + "." + f.Name
			}
			typesAssertFilled(t, v.Field(i), p, zeroOK)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			typesAssertFilled(t, v.Index(i), path, zeroOK)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if iter.Value().Kind() == reflect.Interface {
				continue
			}
			typesAssertFilled(t, iter.Value(), path, zeroOK)
		}
	}
}

func TestTypesRoundTrip(t *testing.T) {
	for _, ex := range typesObjectExamples() {
		t.Run(ex.name, func(t *testing.T) {
			typesAssertFilled(t, reflect.ValueOf(ex.value), "", ex.zeroOKAt)
			typesRoundTrip(t, ex.value)
		})
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	examples := typesPayloadExamples()
	for _, ct := range slices.Concat(CoreCommandTypes, ExtCommandTypes) {
		t.Run(string(ct), func(t *testing.T) {
			ex, ok := examples[ct]
			if !ok {
				t.Fatalf("no example payload for %s", ct)
			}
			target := PayloadFor(ct)
			if got, want := reflect.TypeOf(target).Elem(), reflect.TypeOf(ex); got != want {
				t.Fatalf("PayloadFor gives %v, example is %v", got, want)
			}
			typesAssertFilled(t, reflect.ValueOf(ex), "", nil)
			b := typesRoundTrip(t, ex)
			// The payload also decodes through PayloadFor's value.
			if err := DecodeExact(b, target, CodeSchemaValidationFailed); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(reflect.ValueOf(target).Elem().Interface(), ex) {
				t.Fatalf("PayloadFor target decoded differently")
			}
		})
	}
	if len(examples) != len(CoreCommandTypes)+len(ExtCommandTypes) {
		t.Fatalf("%d examples for %d command types", len(examples), len(CoreCommandTypes)+len(ExtCommandTypes))
	}
}

func TestPayloadFor(t *testing.T) {
	all := slices.Concat(CoreCommandTypes, ExtCommandTypes)
	if len(all) != 39 {
		t.Fatalf("expected 32 core + 7 ext command types, got %d", len(all))
	}
	seen := map[reflect.Type]CommandType{}
	for _, ct := range all {
		p := PayloadFor(ct)
		if p == nil {
			t.Errorf("PayloadFor(%s) = nil", ct)
			continue
		}
		rt := reflect.TypeOf(p)
		if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
			t.Errorf("PayloadFor(%s) is %v, want a pointer to a struct", ct, rt)
			continue
		}
		if !reflect.ValueOf(p).Elem().IsZero() {
			t.Errorf("PayloadFor(%s) is not zero", ct)
		}
		if prev, dup := seen[rt]; dup {
			t.Errorf("%s and %s share payload type %v", prev, ct, rt)
		}
		seen[rt] = ct
		if PayloadFor(ct) == p {
			t.Errorf("PayloadFor(%s) returned the same pointer twice", ct)
		}
	}
	for _, ct := range []CommandType{"", "work.reject_offer", "ext.acme.billing.charge", "WORK.START", "work.start "} {
		if p := PayloadFor(ct); p != nil {
			t.Errorf("PayloadFor(%q) = %T, want nil", ct, p)
		}
	}
}

// typesSemantic decodes JSON into generic values so member order and
// spacing do not matter.
func typesSemantic(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

const typesWireSignature = `{"alg": "Ed25519", "keyId": "agent:w1#k1", "createdAt": "2026-11-30T08:00:00Z", "value": "c2lnbmF0dXJl"}`

// The examples of docs/wire.md, with its comments and placeholders for nested
// objects filled in.
var typesWireExamples = []struct {
	name   string
	target func() any
	doc    string
}{
	{"signature", func() any { return new(Signature) }, typesWireSignature},
	{"actor", func() any { return new(Actor) }, `{"kind": "agent", "id": "worker-1"}`},
	{"command", func() any { return new(Command) }, `{
  "actionId": "act-01J...", "protocolVersion": "0.1",
  "actor": {"kind": "agent", "id": "worker-1"},
  "type": "work.accept_offer",
  "groupId": "grp-a",
  "sessionEpoch": 3,
  "membershipEpoch": 1,
  "coordinatorEpoch": 2,
  "expectedRevision": 7,
  "cooperationOverrideGrantId": "ovr-1",
  "correlationId": "mis-a",
  "issuedAt": "2026-11-30T08:00:00Z",
  "payload": {},
  "extensions": {"<uri>": {"critical": true, "data": {}}},
  "signature": ` + typesWireSignature + `}`},
	{"event", func() any { return new(Event) }, `{
  "eventId": "evt-...", "groupId": "grp-a", "sequence": 42,
  "aggregate": {"kind": "workItem", "id": "wi-7"}, "revision": 5,
  "type": "work.offer.accepted",
  "actor": {"kind": "agent", "id": "worker-1"},
  "causationId": "act-01J...", "correlationId": "mis-a",
  "occurredAt": "2026-11-30T08:00:00.120Z",
  "acceptedBy": "authority-1",
  "payload": {},
  "signature": ` + typesWireSignature + `}`},
	{"organization event", func() any { return new(Event) }, `{
  "eventId": "evt-9", "type": "ext.missionweaveprotocol.identity.session_opened",
  "actor": {"kind": "agent", "id": "worker-1"}, "causationId": "act-2", "correlationId": "worker-1",
  "occurredAt": "2026-11-30T08:00:00Z", "acceptedBy": "authority-1",
  "payload": {"sessionEpoch": 3}, "signature": ` + typesWireSignature + `}`},
	{"error", func() any { return new(Error) }, `{"code": "REVISION_CONFLICT", "message": "...", "retryable": false, "inReplyTo": "f-1", "actionId": "act-1", "details": {"current": 8}}`},
	{"work contract", func() any { return new(WorkContract) }, `{
  "contractId": "wc-1", "revision": 1,
  "goal": "...", "requiredOutputs": [{"name": "patch", "mediaType": "text/x-diff"}],
  "acceptanceCriteria": [{"id": "ac-1", "description": "...", "evidenceRequired": ["test-report"]}],
  "inputs": [{"artifact": "sha256:..."}], "dependencies": [{"workItemId": "wi-1", "policy": "verified"}],
  "allowedTools": ["git"], "allowedData": ["repo:a"], "allowedOperations": ["read", "write"],
  "resourceLimits": {"cpu": 1, "memoryMiB": 512},
  "requiredCapabilities": [{"id": "code.implement", "version": "1.x"}],
  "deadline": "2026-12-01T00:00:00Z", "urgency": "normal", "businessImpact": "medium",
  "budgets": {"money": 5, "tokens": 200000, "toolCalls": 100, "computeSeconds": 600, "wallClockSeconds": 3600, "sideEffects": 10},
  "retryPolicy": {"maxAttempts": 3, "backoff": {"initialMs": 500, "maxMs": 30000, "multiplier": 2}, "attemptTimeoutMs": 600000, "costLimit": 5},
  "risk": {"class": "low", "preExecutionApproval": false},
  "notes": "optional prose; never replaces a field"
}`},
	{"ownership grant", func() any { return new(OwnershipGrant) }, `{"workItemId": "wi-7", "ownerAgentId": "worker-1", "ownershipEpoch": 2, "startDeadline": "2026-11-30T08:10:00Z"}`},
	{"execution lease", func() any { return new(ExecutionLease) }, `{"leaseId": "l-1", "agentId": "worker-1", "sessionEpoch": 3, "workItemId": "wi-7", "ownershipEpoch": 2, "startedAt": "2026-11-30T08:00:00Z", "renewals": [], "expiresAt": "2026-11-30T08:05:00Z"}`},
	{"progress", func() any { return new(Progress) }, `{"phase": "testing", "milestonesCompleted": [], "nextCheckpoint": "cp", "blockers": [], "revisedEstimate": {"completionAt": "2026-11-30T09:00:00Z", "confidence": 0.5}, "evidenceRefs": []}`},
	{"schedule disclosure", func() any { return new(ScheduleDisclosure) }, `{"estimatedStartWindow": {"from": "2026-11-30T08:00:00Z", "to": "2026-11-30T08:30:00Z"}, "estimatedCompletion": "2026-11-30T09:00:00Z", "confidence": 0.8, "capacityState": "available", "computedAt": "2026-11-30T08:00:00Z"}`},
	{"admission rejection", func() any { return new(AdmissionRejection) }, `{"reason": "capacity", "detail": "all slots committed"}`},
	{"usage", func() any { return new(Usage) }, `{"money": 0.5, "tokens": 10, "toolCalls": 1, "computeSeconds": 2, "wallClockSeconds": 3, "sideEffects": 0}`},
	{"evidence", func() any { return new(Evidence) }, `{"subject": "wi-7", "criteria": ["ac-1"], "method": "deterministic-test", "result": "pass", "producer": {"kind": "agent", "id": "w"}, "timestamp": "2026-11-30T08:00:00Z", "artifacts": []}`},
	{"artifact manifest", func() any { return new(ArtifactManifest) }, `{"contentHash": "sha256:ab", "mediaType": "text/plain", "schema": "https://www.iana.org/assignments/media-types/text/plain", "producer": {"agentId": "w", "agentVersion": "1", "agentCardHash": "sha256:cd"}, "missionId": "m", "groupId": "g", "workItemId": "wi", "sourceArtifacts": [], "toolVersions": {}, "createdAt": "2026-11-30T08:00:00Z", "classification": "internal", "size": 0, "uri": "https://a.example/x", "signature": ` + typesWireSignature + `}`},
	{"ack receipt", func() any { return new(AckFrame) }, `{"type": "ACK", "frameId": "f-2", "inReplyTo": "f-1", "receipt": {"actionId": "act-1", "events": [{"eventId": "evt-1", "groupId": "grp-a", "sequence": 42}]}}`},
	{"ack cursors", func() any { return new(AckFrame) }, `{"type": "ACK", "frameId": "f-3", "cursors": [{"groupId": "grp-a", "sequence": 0}]}`},
	{"subscribe", func() any { return new(Subscribe) }, `{"type": "SUBSCRIBE", "frameId": "f-4", "groups": [{"groupId": "grp-a", "afterSequence": 0}, {"groupId": "grp-b", "afterSequence": 7, "filter": {"types": ["work.offer.created"]}}]}`},
	{"ping", func() any { return new(Ping) }, `{"type": "PING", "frameId": "f-5", "nonce": "n0nce-abcdefghijkl", "reply": true}`},
	{"backpressure", func() any { return new(Backpressure) }, `{"type": "BACKPRESSURE", "frameId": "f-6", "groupId": "grp-a", "retryAfterMs": 0}`},
	{"error frame", func() any { return new(ErrorFrame) }, `{"type": "ERROR", "frameId": "f-7", "error": {"code": "AUTH_REQUIRED", "message": "HELLO first", "retryable": false}}`},
}

func TestWireExamplesRoundTrip(t *testing.T) {
	for _, ex := range typesWireExamples {
		t.Run(ex.name, func(t *testing.T) {
			target := ex.target()
			if err := DecodeExact([]byte(ex.doc), target, CodeSchemaValidationFailed); err != nil {
				t.Fatalf("decode: %v", err)
			}
			out, err := json.Marshal(target)
			if err != nil {
				t.Fatal(err)
			}
			if want, got := typesSemantic(t, []byte(ex.doc)), typesSemantic(t, out); !reflect.DeepEqual(want, got) {
				t.Fatalf("not semantically equal\nwire %v\nours %v", want, got)
			}
		})
	}
}

func TestOptionalEpochsKeepAbsentAndZeroApart(t *testing.T) {
	members := []string{"sessionEpoch", "membershipEpoch", "coordinatorEpoch", "expectedRevision"}
	for _, tc := range []struct {
		name    string
		set     func(c *Command)
		present []string
	}{
		{"none", func(c *Command) {}, nil},
		{"all zero", func(c *Command) {
			c.SessionEpoch, c.MembershipEpoch, c.CoordinatorEpoch, c.ExpectedRevision = Uint64(0), Uint64(0), Uint64(0), Uint64(0)
		}, members},
		{"human in group", func(c *Command) { c.MembershipEpoch = Uint64(0) }, []string{"membershipEpoch"}},
		{"agent", func(c *Command) { c.SessionEpoch, c.MembershipEpoch = Uint64(0), Uint64(5) }, []string{"sessionEpoch", "membershipEpoch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := typesCommand()
			c.SessionEpoch, c.MembershipEpoch, c.CoordinatorEpoch, c.ExpectedRevision = nil, nil, nil, nil
			tc.set(&c)
			b := typesRoundTrip(t, c)
			obj := typesSemantic(t, b).(map[string]any)
			for _, m := range members {
				_, has := obj[m]
				if want := slices.Contains(tc.present, m); has != want {
					t.Errorf("%s present=%v, want %v in %s", m, has, want, b)
				}
			}
		})
	}
}

func TestOrganizationEventOmitsGroupMembers(t *testing.T) {
	ev := typesEvent()
	ev.Type = EvtSessionOpened
	ev.GroupID, ev.Sequence, ev.Aggregate, ev.Revision = "", nil, nil, nil
	obj := typesSemantic(t, typesRoundTrip(t, ev)).(map[string]any)
	for _, m := range []string{"groupId", "sequence", "aggregate", "revision"} {
		if _, has := obj[m]; has {
			t.Errorf("organization event carries %s", m)
		}
	}
	if ev.Seq() != 0 || ev.Rev() != 0 {
		t.Errorf("Seq/Rev of an organization event = %d/%d", ev.Seq(), ev.Rev())
	}
	ev = typesEvent()
	ev.Sequence, ev.Revision = Uint64(0), Uint64(0)
	obj = typesSemantic(t, typesRoundTrip(t, ev)).(map[string]any)
	if obj["sequence"] != json.Number("0") || obj["revision"] != json.Number("0") {
		t.Errorf("zero sequence/revision not kept: %v %v", obj["sequence"], obj["revision"])
	}
	ev = typesEvent()
	if ev.Seq() != 42 || ev.Rev() != 5 {
		t.Errorf("Seq/Rev = %d/%d", ev.Seq(), ev.Rev())
	}
}

func TestExtensionDataPreserved(t *testing.T) {
	for _, tc := range []struct {
		name  string
		data  string
		exact bool // compact data without <, > or & comes back byte for byte
	}{
		{"object in odd order", `{"z":1,"a":[1.50,2e3,-0,1E-7],"n":null}`, true},
		{"escapes kept", `{"s":"a\/b\u00e9\ud834\udd1e","t":"\"q\""}`, true},
		{"scalar", `1.000`, true},
		{"null", `null`, true},
		{"whitespace", "{ \"b\" : [ 1 , 2 ],\n \"a\" : true }", false},
		{"html characters", `{"h":"<a href=\"x\">&</a>"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := typesCommand()
			c.Extensions = Extensions{
				"urn:example:unknown": {Critical: false, Data: json.RawMessage(tc.data)},
				OfflineExtensionURI:   c.Extensions[OfflineExtensionURI],
			}
			out, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var back Command
			if err := DecodeExact(out, &back, CodeSchemaValidationFailed); err != nil {
				t.Fatal(err)
			}
			got := back.Extensions["urn:example:unknown"].Data
			if tc.exact {
				if string(got) != tc.data {
					t.Fatalf("data changed: %s -> %s", tc.data, got)
				}
				if !bytes.Contains(out, []byte(tc.data)) {
					t.Fatalf("marshalled command does not carry the data bytes: %s", out)
				}
			}
			want, err := jcs.Transform([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			have, err := jcs.Transform(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, have) {
				t.Fatalf("JCS bytes changed: %s -> %s", want, have)
			}
			// Relaying the decoded command keeps it stable from then on.
			again, err := json.Marshal(back)
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("relay changed the bytes: %v\n%s\n%s", err, out, again)
			}
			if !reflect.DeepEqual(back.Extensions[OfflineExtensionURI], c.Extensions[OfflineExtensionURI]) {
				t.Fatal("offline binding extension changed")
			}
		})
	}
}

func TestOfflineBindingDecodesFromExtension(t *testing.T) {
	c := typesCommand()
	var b OfflineBinding
	if err := DecodeExact(c.Extensions[OfflineExtensionURI].Data, &b, CodeSchemaValidationFailed); err != nil {
		t.Fatal(err)
	}
	if b.HistoricalLeaseID != "lease-9" || b.BufferedAt.String() != "2026-11-30T07:55:00.250Z" || b.UsageDelta.Tokens != 1200 {
		t.Fatalf("decoded %+v", b)
	}
}

func TestRequiredCollectionsNeverNull(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{Receipt{ActionID: "a"}, `{"actionId":"a","events":[]}`},
		{Subscribe{Type: FrameSubscribe, FrameID: "f"}, `{"type":"SUBSCRIBE","frameId":"f","groups":[]}`},
		{Progress{Phase: "p", NextCheckpoint: "c", RevisedEstimate: RevisedEstimate{CompletionAt: typesAt(0)}},
			`{"phase":"p","milestonesCompleted":[],"nextCheckpoint":"c","blockers":[],"revisedEstimate":{"completionAt":"2026-11-30T08:00:00Z","confidence":0},"evidenceRefs":[]}`},
		{ArtifactProducer{}, `{"agentId":"","agentVersion":"","agentCardHash":""}`},
		{struct {
			M StringMap `json:"m"`
		}{}, `{"m":{}}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%T: got %s (%v), want %s", tc.v, b, err, tc.want)
		}
	}
	// Slices convert without a cast in both directions.
	var l List[string] = []string{"a"}
	var s []string = l
	if len(s) != 1 {
		t.Fatal(s)
	}
}

func TestEnumRanksAndKnown(t *testing.T) {
	urg := []Urgency{UrgencyLow, UrgencyNormal, UrgencyHigh, UrgencyCritical}
	risk := []RiskClass{RiskLow, RiskMedium, RiskHigh, RiskCritical}
	imp := []BusinessImpact{ImpactLow, ImpactMedium, ImpactHigh, ImpactCritical}
	pri := []PriorityClass{PriorityLow, PriorityNormal, PriorityHigh, PriorityCritical}
	for i := range 4 {
		if urg[i].Rank() != i || risk[i].Rank() != i || imp[i].Rank() != i || pri[i].Rank() != i {
			t.Errorf("rank %d: %d %d %d %d", i, urg[i].Rank(), risk[i].Rank(), imp[i].Rank(), pri[i].Rank())
		}
		if !urg[i].Known() || !risk[i].Known() || !imp[i].Known() || !pri[i].Known() {
			t.Errorf("level %d not known", i)
		}
	}
	// The two scales differ in their second step.
	for _, bad := range []string{"", "medium", "Low", "urgent"} {
		if Urgency(bad).Known() || Urgency(bad).Rank() != -1 {
			t.Errorf("urgency %q known", bad)
		}
	}
	for _, bad := range []string{"", "normal", "HIGH"} {
		if RiskClass(bad).Known() || BusinessImpact(bad).Known() {
			t.Errorf("risk/impact %q known", bad)
		}
	}

	known := []struct {
		name string
		ok   bool
	}{
		{"actor agent", ActorAgent.Known()}, {"actor service", ActorService.Known()}, {"actor bot", !ActorKind("bot").Known()},
		{"frame ACK", FrameAck.Known()}, {"frame ack", !FrameType("ack").Known()},
		{"capacity offline", CapacityOffline.Known()}, {"capacity busy", !CapacityState("busy").Known()},
		{"reason budget", RejectBudget.Known()}, {"reason price", !AdmissionReason("price").Known()},
		{"policy terminal", DependencyTerminal.Known()}, {"policy done", !DependencyPolicy("done").Known()},
		{"role missionOwner", RoleMissionOwner.Known()}, {"role admin", !Role("admin").Known()},
		{"mission awaiting_approval", MissionAwaitingApproval.Known()}, {"mission open", !MissionState("open").Known()},
		{"mission approved terminal", MissionApproved.Terminal()}, {"mission active not terminal", !MissionActive.Terminal()},
		{"work cancelled", WorkCancelled.Known()}, {"work proposed is no WorkItem state", !WorkProposed.Known()},
		{"work verified terminal", WorkVerified.Terminal()}, {"work failed not terminal", !WorkFailed.Terminal()},
	}
	for _, k := range known {
		if !k.ok {
			t.Errorf("%s: wrong", k.name)
		}
	}
	states := []WorkItemState{WorkOpen, WorkOffered, WorkQueued, WorkActive, WorkBlocked, WorkSubmitted, WorkVerified, WorkFailed, WorkCancelled}
	for _, s := range states {
		if !s.Known() {
			t.Errorf("state %s unknown", s)
		}
	}
}

func TestUsageAndBudgets(t *testing.T) {
	u := typesUsage()
	sum := u.Add(u)
	if sum.Tokens != 2400 || sum.Money != 0.84 || sum.SideEffects != 2 || sum.ComputeSeconds != 25 {
		t.Fatalf("Add = %+v", sum)
	}
	if u.IsZero() || !(Usage{}).IsZero() {
		t.Fatal("IsZero wrong")
	}
	for _, tc := range []struct {
		name string
		b    Budgets
		used Usage
		want string
	}{
		{"no caps", Budgets{}, u, ""},
		{"within every cap", typesBudgets(), u, ""},
		{"at the cap", Budgets{Tokens: Uint64(1200)}, u, ""},
		{"tokens over", Budgets{Tokens: Uint64(1199)}, u, "tokens"},
		{"zero side effects allowed", Budgets{SideEffects: Uint64(0)}, u, "sideEffects"},
		{"money first", Budgets{Money: Float64(0.1), ToolCalls: Uint64(0)}, u, "money"},
		{"wall clock", Budgets{WallClockSeconds: Float64(29.9)}, u, "wallClockSeconds"},
		{"compute", Budgets{ComputeSeconds: Float64(12)}, u, "computeSeconds"},
		{"tool calls", Budgets{ToolCalls: Uint64(2)}, u, "toolCalls"},
	} {
		if got := tc.b.Exceeded(tc.used); got != tc.want {
			t.Errorf("%s: Exceeded = %q, want %q", tc.name, got, tc.want)
		}
	}
	// An absent budget dimension stays absent on the wire; a zero cap stays.
	b, _ := json.Marshal(Budgets{SideEffects: Uint64(0)})
	if string(b) != `{"sideEffects":0}` {
		t.Fatalf("budgets: %s", b)
	}
}

func TestTypesWireNamesAreLowerCamel(t *testing.T) {
	// Every member name we emit starts lower case and has no separators,
	// so a typo in a tag shows up here rather than at a peer.
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				inFree := strings.Contains(path, "/extensions/") || strings.Contains(path, "/details") ||
					strings.Contains(path, "/toolVersions") || strings.Contains(path, "/payload") ||
					strings.Contains(path, "/draftContract") || strings.HasSuffix(path, "/extensions")
				if !inFree && (k == "" || k[0] < 'a' || k[0] > 'z' || strings.ContainsAny(k, "_- ")) {
					t.Errorf("member %q at %s is not lowerCamelCase", k, path)
				}
				walk(val, path+"/"+k)
			}
		case []any:
			for _, el := range x {
				walk(el, path+"/*")
			}
		}
	}
	for _, ex := range typesObjectExamples() {
		b, _ := json.Marshal(ex.value)
		walk(typesSemantic(t, b), ex.name)
	}
	for ct, ex := range typesPayloadExamples() {
		b, _ := json.Marshal(ex)
		walk(typesSemantic(t, b), string(ct))
	}
}

// TestTypesMatchSchemas checks the Go types against the normative schemas:
// every example, marshalled, is a valid document, and every payload example
// is valid inside a Command of its type (the command schema dispatches the
// payload by type).
func TestTypesMatchSchemas(t *testing.T) {
	schemaOf := map[string]string{
		"Command": "command", "Event": "event", "WorkContract": "work-contract", "WorkItem": "work-item",
		"ExecutionLease": "lease", "AgentCard": "agent-card", "PresenceRecord": "presence-record",
		"Mission": "mission", "Group": "group", "Membership": "membership", "Conversation": "conversation",
		"Message": "message", "ArtifactManifest": "artifact", "Evidence": "evidence", "Approval": "approval",
		"ContextPackage": "context-package", "GroupSnapshot": "group-snapshot",
		"ExtensionProfile": "extension-profile", "FirstAdmissionRecord": "first-admission-record",
	}
	for _, ex := range typesObjectExamples() {
		name, ok := schemaOf[ex.name]
		if _, isFrame := reflect.TypeOf(ex.value).FieldByName("FrameID"); isFrame {
			name, ok = "websocket-frame", true
		}
		if !ok {
			continue // a part of a larger document, checked inside it
		}
		t.Run(ex.name, func(t *testing.T) {
			b, err := json.Marshal(ex.value)
			if err != nil {
				t.Fatal(err)
			}
			v, err := Parse(b, DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(name, v); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, b)
			}
		})
	}
	for ct, p := range typesPayloadExamples() {
		t.Run(string(ct), func(t *testing.T) {
			c := typesCommand()
			c.Type = ct
			var err error
			if c.Payload, err = json.Marshal(p); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			v, err := Parse(b, DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate("command", v); err != nil {
				t.Fatalf("%v\n%s", err, c.Payload)
			}
		})
	}
}
